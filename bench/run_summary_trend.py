"""Benchmark: the service page's run-evidence trend over 60 days at `seed_demo --scale 2000`.

Times `ledger.queries.run_trend` (the chart's data: the days, the live-revision
changes, their revision numbers) and, apart, building the plotly figure and its
JSON spec, for the drifting demo service and a fleet service, with 2,000 fleet
services of 60 days each (120,000 days) in the table. Target: the data in under
50 ms (p95), in a number of queries that does not grow with the data. Exits 1
when it misses.

Seeds the fleet and its run evidence first when the database has fewer than
`--scale` fleet services or they have no days (minutes; see bench/README.md):

    DATABASE_URL=postgres://root@127.0.0.1:5432/ledger_bench \\
        .venv/bin/python bench/run_summary_trend.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _setup_django() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()


def _timed(call: Callable[[], Any], repeat: int) -> tuple[list[float], list[float], int, Any]:
    """Wall-clock and this process's CPU time of each call, the queries of one, its result.

    The CPU time says what the work costs when the machine is shared: a loaded
    machine stretches the wall clock, not the CPU the call needs.
    """
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    call()  # warm-up: the connection, plotly's validators
    with CaptureQueriesContext(connection) as captured:
        result = call()
    times, cpu = [], []
    for _ in range(repeat):
        started, started_cpu = time.perf_counter(), time.process_time()
        call()
        times.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
    return times, cpu, len(captured), result


def _line(label: str, times: list[float], cpu: list[float], queries: int | None = None) -> float:
    cuts = statistics.quantiles(times, n=20, method="inclusive")
    median, p95 = statistics.median(times) * 1000, cuts[18] * 1000
    counted = f"  {queries} queries" if queries is not None else ""
    print(
        f"  {label:<26} median {median:6.2f} ms  p95 {p95:6.2f} ms  "
        f"max {max(times) * 1000:6.2f} ms  (CPU median {statistics.median(cpu) * 1000:5.2f} ms)"
        f"{counted}"
    )
    return p95


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=int, default=2000, help="fleet services wanted (2000)")
    parser.add_argument("--repeat", type=int, default=100, help="timed calls each (100)")
    parser.add_argument(
        "--no-seed", action="store_true", help="measure what the database holds; seed nothing"
    )
    args = parser.parse_args()

    _setup_django()
    from django.core.management import call_command
    from django.db import connection

    from ledger import queries, trend_charts
    from ledger.demo import fleet_slug
    from ledger.models import Event, RunSummary, Service
    from lib.charts import figure_spec

    print(f"database: {connection.vendor} {connection.settings_dict['NAME']}")
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"machine: {os.cpu_count()} CPUs, load average {load}; {args.repeat} calls each")
    fleet = Service.objects.filter(slug__startswith="fleet-")
    with_days = RunSummary.objects.filter(service__in=fleet).values("service").distinct().count()
    if not args.no_seed and (fleet.count() < args.scale or with_days < fleet.count()):
        print(f"{fleet.count()} fleet services, {with_days} with run evidence; seeding …")
        call_command("seed_demo", scale=args.scale, quiet_logins=True)
    print(
        f"data: {Service.objects.count()} services, {RunSummary.objects.count()} run summaries, "
        f"{Event.objects.count()} events"
    )

    slow = False
    print(f"fleet: {fleet.count()} services, {with_days} with run evidence")
    measured = fleet_slug(1)
    for slug in ("kb-assistant", measured):
        service = Service.objects.get(slug=slug)
        times, cpu, count, trend = _timed(lambda s=service: queries.run_trend(s), args.repeat)
        print(f"{slug}: {len(trend['points'])} days, {len(trend['markers'])} markers")
        slow |= _line("trend data (run_trend)", times, cpu, count) >= 50
        figure_times, figure_cpu, _, spec = _timed(
            lambda t=trend: figure_spec(trend_charts.trend_figure(t)), max(10, args.repeat // 5)
        )
        _line("figure and its JSON spec", figure_times, figure_cpu)
        print(
            f"  {'':<26} {len(spec['data'])} traces, {len(spec['layout'].get('shapes', []))} shapes"
        )
    with connection.cursor() as cursor:
        cursor.execute(
            "EXPLAIN ANALYZE SELECT date, source, requests, ttft_p95_ms, error_rate "
            "FROM ledger_runsummary WHERE service_id = %s AND date >= CURRENT_DATE - 59",
            [Service.objects.get(slug=measured).pk],
        )
        plan = [row[0] for row in cursor.fetchall()]
    print("plan of the days' query:")
    for row in plan[:4]:
        print(f"  {row}")
    return 1 if slow else 0


if __name__ == "__main__":
    sys.exit(main())
