"""Benchmark: the closed loop of issue 30 against a real Prometheus.

Starts Debian's Prometheus (`make prometheus`) on a free loopback port, scraping two fake
vLLM engines every second (`tests/support`: `canary-lab-live` at 200 ms TTFT and
`canary-lab-candidate`, 20 requests/s each), then:

1. **One tick over many stages** (500 by default): that many fleet services (`seed_demo
   --scale`; the script seeds what is missing) are given, inside a transaction rolled
   back at the end, a release rolling out at stage 1 of 3 with an analysis due now (a
   10 s interval), a candidate backend selected by `{model_name="canary-lab-candidate"}`
   and a live one by `{model_name="canary-lab-live"}` — every stage measures real
   series. Prints the tick's wall time, its SQL queries and the requests sent to
   Prometheus (counted by Prometheus itself), neither of which may grow with the stages.
2. **Decision latency**: one such stage, the beat's tick every 10 s in real time; the
   candidate's TTFT doubles at T0; prints the seconds and the intervals from T0 to the
   recorded rollback.

Targets: the tick over 500 stages under 10 s, with the same SQL queries and Prometheus
requests as over 5; the rollback within two intervals. Exits 1 when it misses.

    DATABASE_URL=postgres://root@127.0.0.1:5432/ledger_bench \\
        .venv/bin/python bench/analysis_tick.py [--stages 500]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_S = 10.0
INTERVAL_S = 10
LIVE, CANDIDATE = "canary-lab-live", "canary-lab-candidate"


class Rollback(Exception):
    pass


def _setup_django() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("REPLAY_ALLOWED_HOSTS", "127.0.0.0/8")
    os.environ.setdefault("DEBUG", "true")
    import django

    django.setup()


def _fleet(wanted: int) -> list[tuple[int, int, int]]:
    """(service, live revision, another revision) of `wanted` fleet services."""
    from django.core.management import call_command

    from ledger.models import Revision, Service

    have = Service.objects.filter(slug__startswith="fleet-", live_revision__isnull=False).count()
    if have < wanted:
        print(f"{have} fleet services; seeding {wanted} (seed_demo --scale {wanted}) …")
        call_command("seed_demo", "--scale", str(wanted), "--quiet-logins")
    services = list(
        Service.objects.filter(slug__startswith="fleet-", live_revision__isnull=False)
        .order_by("slug")
        .values_list("pk", "live_revision_id")[:wanted]
    )
    newest: dict[int, list[int]] = {}
    for service_id, revision_id in (
        Revision.objects.filter(service_id__in=[s for s, _ in services])
        .order_by("service_id", "-number")
        .values_list("service_id", "pk")
    ):
        newest.setdefault(service_id, []).append(revision_id)
    return [
        (service, live, next(r for r in newest[service] if r != live)) for service, live in services
    ]


def _rolling_out(rows: list[tuple[int, int, int]], started: dt.datetime) -> None:
    """A release at stage 1 with an analysis per service, and its two backends (bulk)."""
    from django.contrib.auth import get_user_model

    from releases.models import Release, Stage
    from replay.models import Backend

    filer = get_user_model().objects.get(username="owner")
    releases = Release.objects.bulk_create(
        [
            Release(
                service_id=service,
                from_revision_id=live,
                to_revision_id=candidate,
                change_kind="model_upgrade",
                summary="bench: analysed rollout",
                state="rolling_out",
                filed_by=filer,
                submitted_at=started,
            )
            for service, live, candidate in rows
        ],
        batch_size=1000,
    )
    analysis = {
        "source": "prometheus",
        "interval_s": INTERVAL_S,
        "consecutive_error_limit": 3,
        "on_breach": "rollback",
        "auto_promote": True,
        "queries": {},
    }
    guard = {
        "metric": "ttft_p95_ms",
        "max": 800.0,
        "max_increase_pct": 50.0,
        "min_requests": 0,
        "critical": True,
        "dry_run": False,
    }
    stages = []
    for release in releases:
        for number, share in enumerate((10, 50, 100), start=1):
            stages.append(
                Stage(
                    release=release,
                    number=number,
                    traffic_pct=share,
                    observation_minutes=60,
                    guards=[guard],
                    error_limit=100,
                    analysis=analysis,
                    state="observing" if number == 1 else "pending",
                    started_at=started if number == 1 else None,
                )
            )
    Stage.objects.bulk_create(stages, batch_size=3000)
    Backend.objects.bulk_create(
        [
            Backend(
                name=f"bench-an-{side}-{service}",
                revision_id=revision,
                base_url="http://10.0.0.9:8000",
                model_name=model,
                engine="vllm",
                metrics_matcher=f'{{model_name="{model}"}}',
            )
            for service, live, candidate in rows
            for side, revision, model in (("live", live, LIVE), ("cand", candidate, CANDIDATE))
        ],
        batch_size=2000,
    )


def _queries_served(prometheus_url: str) -> float:
    """Prometheus' own count of the instant queries it answered (its /metrics)."""
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(f"{prometheus_url}/metrics", timeout=30).text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "prometheus_http_requests_total"
        and sample.labels.get("handler") == "/api/v1/query"
    )


def _tick(
    count: int, rows: list[tuple[int, int, int]], prometheus_url: str
) -> tuple[float, int, int, dict[str, int]]:
    """One tick over `count` stages: seconds, SQL queries, Prometheus requests, verdicts."""
    from django.conf import settings
    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from releases.analysis.services import run_tick

    settings.PROMETHEUS_URL = prometheus_url
    result: tuple[float, int, int, dict[str, int]] = (0.0, 0, 0, {})
    try:
        with transaction.atomic():
            _rolling_out(rows[:count], timezone.now() - dt.timedelta(seconds=INTERVAL_S + 1))
            served = _queries_served(prometheus_url)
            with CaptureQueriesContext(connection) as queries:
                start = time.perf_counter()
                outcomes = run_tick()
                seconds = time.perf_counter() - start
            requests = int(_queries_served(prometheus_url) - served)
            verdicts: dict[str, int] = {}
            for outcome in outcomes:
                verdicts[outcome.verdict] = verdicts.get(outcome.verdict, 0) + 1
            result = (seconds, len(queries.captured_queries), requests, verdicts)
            raise Rollback
    except Rollback:
        pass
    return result


def _decision_latency(
    rows: list[tuple[int, int, int]], prometheus_url: str, candidate_engine
) -> tuple[float, int]:
    """Seconds and ticks from the candidate's TTFT doubling to the recorded rollback, the
    beat ticking once a second past each interval's end, as its schedule does."""
    from django.conf import settings
    from django.db import transaction
    from django.utils import timezone

    from releases.analysis.services import run_tick
    from releases.models import Release

    settings.PROMETHEUS_URL = prometheus_url
    elapsed, ticks = -1.0, 0
    try:
        with transaction.atomic():
            _rolling_out(rows[:1], timezone.now())
            release = Release.objects.filter(summary="bench: analysed rollout").latest("pk")
            due = time.monotonic() + INTERVAL_S + 1
            for _healthy in range(2):
                time.sleep(max(0.0, due - time.monotonic()))
                run_tick()
                due += INTERVAL_S
            time.sleep(max(0.0, due - INTERVAL_S / 2 - time.monotonic()))
            candidate_engine.traffic(ttft_ms=400)  # mid-interval
            changed = time.monotonic()
            while ticks < 6:
                time.sleep(max(0.0, due - time.monotonic()))
                run_tick()
                due += INTERVAL_S
                ticks += 1
                release.refresh_from_db()
                if release.state != Release.State.ROLLING_OUT:
                    elapsed = time.monotonic() - changed
                    break
            raise Rollback
    except Rollback:
        pass
    return elapsed, ticks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stages", type=int, default=500)
    options = parser.parse_args()
    _setup_django()
    from tests.support.fake_openai import FakeEngine, fake_openai_process
    from tests.support.prometheus import PrometheusServer

    rows = _fleet(options.stages)
    with contextlib.ExitStack() as stack:
        engines = {}
        for model in (LIVE, CANDIDATE):
            base = stack.enter_context(
                fake_openai_process("--model", model, "--engine-metrics", timeout=120)
            )
            engines[model] = FakeEngine(base, model)
            engines[model].traffic(rps=20, ttft_ms=200)
        folder = stack.enter_context(tempfile.TemporaryDirectory())
        prometheus = PrometheusServer(
            Path(folder), targets=[e.target for e in engines.values()], scrape_interval="1s"
        )
        prometheus.start()
        stack.callback(prometheus.stop)
        prometheus.wait_for(
            f"min(count_over_time(vllm:time_to_first_token_seconds_count[{INTERVAL_S}s]))",
            lambda result: bool(result) and float(result[0]["value"][1]) >= INTERVAL_S - 1,
        )
        small = _tick(5, rows, prometheus.url)
        large = _tick(options.stages, rows, prometheus.url)
        for label, (seconds, queries, requests, verdicts) in (
            ("5 stages", small),
            (f"{options.stages} stages", large),
        ):
            print(
                f"one tick over {label}: {seconds:.2f} s, {queries} SQL queries "
                f"({queries / int(label.split()[0]):.1f} per stage), {requests} requests to "
                f"Prometheus, verdicts {verdicts}"
            )
        latency, intervals = _decision_latency(rows, prometheus.url, engines[CANDIDATE])
        print(
            f"decision latency: the candidate's TTFT doubled mid-interval; rolled back "
            f"{latency:.1f} s later ({latency / INTERVAL_S:.1f} intervals of {INTERVAL_S} s), "
            f"at tick {intervals} after the change"
            if latency >= 0
            else "decision latency: not rolled back within 6 ticks"
        )
    missed = []
    if large[0] >= TARGET_S:
        missed.append(f"tick over {options.stages} stages took {large[0]:.1f} s ≥ {TARGET_S} s")
    if large[2] != small[2]:
        missed.append("Prometheus requests grew with the stages")
    if large[1] != small[1]:
        missed.append("SQL queries grew with the stages")
    if latency < 0 or intervals > 2:
        missed.append("the rollback took more than two intervals")
    for miss in missed:
        print("MISSED:", miss)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
