"""Benchmark: server time and SQL queries of the release page and the release list.

With `seed_demo --scale 2000` plus 10,000 releases spread over the fleet
services and states, requests go through Django's test Client (the whole
middleware and view stack, no network; settings as deployed, without the test
instrumentation of templates: `serve_as_deployed`), logged in as the demo SRE (a signer,
so the release page offers a sign-off and checks who may give it). For each
page: median, p95 and worst time over `--requests` requests after a warm-up,
and the number of SQL queries one request makes. Target: a median under 60 ms
and a query count that does not grow with the data.

Seeds what is missing first: the fleet (minutes; see bench/README.md), then
the releases, as rows in one bulk insert (their contents do not matter to the
pages' query plans; the measured release is filed through the verbs):

    DATABASE_URL=postgres://root@127.0.0.1:5432/ledger_bench \\
        .venv/bin/python bench/releases_pages.py
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_MS = 60
STATES = ["draft", "submitted", "approved", "rejected", "withdrawn", "released"]
KINDS = ["model_upgrade", "engine_upgrade", "launch_parameters", "capacity", "routing"]


def _setup_django() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("STATIC_MANIFEST", "false")
    import django

    django.setup()


def serve_as_deployed() -> None:
    """Settings as a deployed server runs them, for the test Client's requests.

    DEBUG off: no query log kept, no template debugging. And no
    `setup_test_environment()`: it makes every template render (down to each
    form widget's) send a signal that the test Client answers by copying the
    template's context, which no server does (8-10 ms of these pages). Only the
    Client's "testserver" host is let through ALLOWED_HOSTS.
    """
    from django.conf import settings

    settings.DEBUG = False
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]


def _measure(
    client, path: str, requests: int, headers: dict
) -> tuple[list[float], list[float], int, int]:
    """Wall and CPU times of this process (what the machine's other work inflates
    less), the queries of one request, its status."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client.get(path, headers=headers)  # warm-up
    with CaptureQueriesContext(connection) as captured:
        response = client.get(path, headers=headers)
    queries = len(captured)
    times, cpu = [], []
    for _ in range(requests):
        started, cpu_started = time.perf_counter(), time.process_time()
        client.get(path, headers=headers)
        times.append(time.perf_counter() - started)
        cpu.append(time.process_time() - cpu_started)
    return times, cpu, queries, response.status_code


def _seed_releases(wanted: int) -> None:
    """Bulk rows of releases over the fleet services (no events: the pages do not read them)."""
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from ledger.models import Revision, Service
    from releases.models import Release

    have = Release.objects.count()
    if have >= wanted:
        return
    print(f"{have} releases; adding {wanted - have} …")
    filer = get_user_model().objects.get(username="owner")
    services = list(
        Service.objects.filter(slug__startswith="fleet-", live_revision__isnull=False)
        .order_by("slug")
        .values_list("pk", "live_revision_id")
    )
    candidates: dict[int, int] = {}
    for service_id, revision_id in Revision.objects.order_by("service_id", "-number").values_list(
        "service_id", "pk"
    ):
        candidates.setdefault(service_id, revision_id)
    now = timezone.now()
    rows = []
    for n in range(wanted - have):
        service_id, live_id = services[n % len(services)]
        state = STATES[n % len(STATES)]
        created = now - dt.timedelta(minutes=n)
        rows.append(
            Release(
                service_id=service_id,
                from_revision_id=live_id,
                to_revision_id=candidates.get(service_id, live_id),
                change_kind=KINDS[n % len(KINDS)],
                summary=f"bench release {n}",
                state=state,
                filed_by=filer,
                submitted_at=None if state == "draft" else created,
            )
        )
    created_rows = Release.objects.bulk_create(rows, batch_size=2000)
    # created_at is auto_now_add: spread the rows over time so "newest first" means something.
    for offset, release in enumerate(created_rows):
        release.created_at = now - dt.timedelta(minutes=offset)
    Release.objects.bulk_update(created_rows, ["created_at"], batch_size=2000)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=int, default=2000, help="fleet services wanted (2000)")
    parser.add_argument("--releases", type=int, default=10_000, help="releases wanted (10,000)")
    parser.add_argument("--requests", type=int, default=50, help="timed requests per page (50)")
    args = parser.parse_args()

    _setup_django()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client

    from ledger.models import Event, Service
    from releases.models import Release

    serve_as_deployed()
    print(f"database: {connection.vendor} {connection.settings_dict['NAME']}")
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"machine: {os.cpu_count()} CPUs, load average {load}; {args.requests} requests a page")
    fleet = Service.objects.filter(slug__startswith="fleet-").count()
    if fleet < args.scale:
        print(f"{fleet} fleet services; seeding up to {args.scale} (seed_demo --scale) …")
        call_command("seed_demo", scale=args.scale, quiet_logins=True)
    _seed_releases(args.releases)
    print(
        f"data: {Service.objects.count()} services, {Release.objects.count()} releases, "
        f"{Event.objects.count()} events"
    )

    # The demo's own releases are filed through the verbs (gates, sign-offs, events):
    # measure the busiest of them; the bulk rows would be a lighter page.
    measured = (
        Release.objects.exclude(summary__startswith="bench release").order_by("-id").first()
        or Release.objects.order_by("-id").first()
    )
    if measured is None:
        print("no release to measure")
        return 1
    client = Client()
    client.force_login(get_user_model().objects.get(username="sre"))
    busy = Service.objects.filter(slug__startswith="fleet-").order_by("slug").first()
    pages = [
        (f"release page #{measured.pk}", f"/releases/{measured.pk}/", {}),
        ("release list", "/releases/", {}),
        ("release list, page 40", "/releases/?page=40", {}),
        ("list by state (htmx)", "/releases/?state=submitted", {"HX-Request": "true"}),
        (
            f"list by service {busy.slug if busy else ''}",
            f"/releases/?service={busy.slug if busy else ''}",
            {},
        ),
        ("waiting for me", "/releases/waiting/", {}),
    ]
    slow = False
    for label, path, headers in pages:
        times, cpu, queries, status = _measure(client, path, args.requests, headers)
        if status != 200:
            print(f"{label:<32} {path}: answered {status}, not timed")
            slow = True
            continue
        cuts = statistics.quantiles(times, n=20, method="inclusive")
        median, p95 = statistics.median(times) * 1000, cuts[18] * 1000
        if not label.startswith("waiting"):
            slow |= median >= TARGET_MS
        print(
            f"{label:<32} median {median:6.1f} ms  p95 {p95:6.1f} ms  "
            f"max {max(times) * 1000:6.1f} ms  (CPU {statistics.median(cpu) * 1000:5.1f} ms)  "
            f"{queries:3d} queries  load {os.getloadavg()[0]:.1f}"
        )
    return 1 if slow else 0


if __name__ == "__main__":
    sys.exit(main())
