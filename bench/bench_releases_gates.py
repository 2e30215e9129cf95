"""Benchmark: computing every admission gate of one release, and the release API's answer.

At `seed_demo --scale 2000` plus 10,000 releases: the median time of
`releases.governance.gates.assess(release)` (every gate, the snapshot and its hash, where
each sign-off stands) and the number of SQL queries it makes, for the demo's
production release awaiting sign-offs (reports, replay runs, a waiver and a
sign-off to read) and for a fleet draft. Then the server time and queries of
`GET /api/releases/{id}/` and of the release list. Target: gates under 50 ms
median with a constant query count.

Seeds what is missing first (the fleet takes minutes; see bench/README.md):

    DATABASE_URL=postgres://root@127.0.0.1:5432/ledger_bench \\
        .venv/bin/python bench/bench_releases_gates.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_MS = 50.0


def _setup_django() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("STATIC_MANIFEST", "false")
    import django

    django.setup()


def _releases_wanted(count: int) -> int:
    """Fill up to `count` releases with fleet drafts, through the verb; returns how many made."""
    from django.contrib.auth import get_user_model

    from ledger.models import Revision, Service
    from releases.governance import services
    from releases.models import Release

    have = Release.objects.count()
    if have >= count:
        return 0
    owner = get_user_model().objects.get(username="owner")
    fleet = list(
        Service.objects.filter(slug__startswith="fleet-", live_revision__isnull=False)
        .select_related("team")
        .order_by("slug")
    )
    live = {service.pk: service.live_revision_id for service in fleet}
    candidates = {}  # the newest revision of each service that is not live
    for revision in Revision.objects.filter(service__in=fleet).order_by("service_id", "number"):
        if revision.pk != live[revision.service_id]:
            candidates[revision.service_id] = revision
    made = 0
    started = time.perf_counter()
    while have + made < count:
        service = fleet[(have + made) % len(fleet)]
        services.create_release(
            actor=None,
            filed_by=owner,
            service=service,
            to_revision=candidates[service.pk],
            change_kind="capacity",
            summary=f"Capacity change {have + made} for {service.slug}",
            gray_stages=[
                {"traffic_pct": 10, "observation_minutes": 30},
                {"traffic_pct": 100, "observation_minutes": 30},
            ],
        )
        made += 1
        if made % 1000 == 0:
            print(f"  releases: {have + made}/{count}, {time.perf_counter() - started:.0f} s")
    return made


def _time(call, repeat: int) -> tuple[float, float, float, int, float]:
    """Median and p95 wall time, median CPU time of this process (what the machine's
    other work does not inflate), queries and their SQL time, all in ms."""
    from django.db import connection, reset_queries
    from django.test.utils import CaptureQueriesContext

    call()  # warm-up
    reset_queries()  # DEBUG keeps at most 9,000 queries: count from an empty log
    with CaptureQueriesContext(connection) as captured:
        call()
    queries = len(captured)
    sql_ms = sum(float(q["time"]) for q in captured.captured_queries) * 1000
    times, cpu = [], []
    for _ in range(repeat):
        reset_queries()
        started, cpu_started = time.perf_counter(), time.process_time()
        call()
        times.append(time.perf_counter() - started)
        cpu.append(time.process_time() - cpu_started)
    cuts = statistics.quantiles(times, n=20, method="inclusive")
    return (
        statistics.median(times) * 1000,
        cuts[18] * 1000,
        statistics.median(cpu) * 1000,
        queries,
        sql_ms,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=int, default=2000, help="fleet services wanted (2000)")
    parser.add_argument("--releases", type=int, default=10_000, help="releases wanted (10,000)")
    parser.add_argument("--repeat", type=int, default=200, help="timed computations (200)")
    args = parser.parse_args()

    _setup_django()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import setup_test_environment

    from ledger.models import Event, Revision, Service
    from releases.governance import gates
    from releases.models import Release, SignOff

    setup_test_environment()
    print(f"database: {connection.vendor} {connection.settings_dict['NAME']}")
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"machine: {os.cpu_count()} CPUs, load average {load}")
    fleet = Service.objects.filter(slug__startswith="fleet-").count()
    if fleet < args.scale or not Release.objects.exists():
        print(f"{fleet} fleet services; seeding up to {args.scale} (seed_demo --scale) …")
        call_command("seed_demo", scale=args.scale, quiet_logins=True)
    made = _releases_wanted(args.releases)
    if made:
        with connection.cursor() as cursor:  # fresh rows: let the planner see them
            cursor.execute("ANALYZE")
    print(
        f"data: {Service.objects.count()} services, {Revision.objects.count()} revisions, "
        f"{Release.objects.count()} releases ({made} new), {SignOff.objects.count()} sign-offs, "
        f"{Event.objects.count()} events"
    )

    waiting = Release.objects.get(service__slug="kb-assistant", state="submitted")
    draft = (
        Release.objects.filter(service__slug__startswith="fleet-", state="draft")
        .order_by("pk")
        .last()
    )
    assert draft is not None, "no fleet release: rerun with --releases"
    slow = False
    for label, release in (("kb-assistant (submitted)", waiting), ("fleet draft", draft)):
        median, p95, cpu, queries, sql_ms = _time(lambda r=release: gates.assess(r), args.repeat)
        slow |= median >= TARGET_MS
        count = len(gates.assess(release).gates)
        print(
            f"gates of {label:<26} median {median:6.1f} ms  p95 {p95:6.1f} ms  "
            f"(CPU {cpu:5.1f} ms)  {queries} queries ({sql_ms:4.1f} ms of SQL) for {count} gates  "
            f"load {os.getloadavg()[0]:.1f}"
        )

    client = Client()
    client.force_login(get_user_model().objects.get(username="owner"))
    for label, path in (
        ("GET /api/releases/{id}/", f"/api/releases/{waiting.pk}/"),
        ("GET /api/releases/?state=draft", "/api/releases/?state=draft"),
    ):
        median, p95, cpu, queries, sql_ms = _time(
            lambda p=path: client.get(p), max(args.repeat // 4, 20)
        )
        print(
            f"{label:<36} median {median:6.1f} ms  p95 {p95:6.1f} ms  (CPU {cpu:5.1f} ms)  "
            f"{queries} queries ({sql_ms:4.1f} ms of SQL)  load {os.getloadavg()[0]:.1f}"
        )
    return 1 if slow else 0


if __name__ == "__main__":
    sys.exit(main())
