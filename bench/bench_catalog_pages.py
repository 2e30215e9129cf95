"""Benchmark: server time and SQL queries of the service catalog and a service page.

Requests go through Django's test Client (the whole middleware and view
stack, no network), logged in as the demo owner. For each page: median, p95
and worst time over `--requests` requests after a warm-up, and the number of
SQL queries one request makes. Target: under 50 ms at `seed_demo --scale 2000`,
and a query count that does not grow with the data.

Seeds the fleet first when the database has fewer fleet services than
`--scale` (that takes minutes; see bench/README.md):

    DATABASE_URL=postgres://root@127.0.0.1:5432/ledger_bench \\
        .venv/bin/python bench/bench_catalog_pages.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _setup_django() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    # As in the test suite: static URLs without a collectstatic manifest (not what is measured).
    os.environ.setdefault("STATIC_MANIFEST", "false")
    import django

    django.setup()


def _measure(
    client, path: str, requests: int, headers: dict
) -> tuple[list[float], int, float, dict | None, int]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    response = client.get(path, headers=headers)  # warm-up: caches, first connection
    with CaptureQueriesContext(connection) as captured:
        response = client.get(path, headers=headers)
    # Read now: the next request_started resets the query log.
    queries = len(captured)
    sql_ms = sum(float(query["time"]) for query in captured.captured_queries) * 1000
    slowest = max(captured.captured_queries, key=lambda q: float(q["time"]), default=None)
    times = []
    for _ in range(requests):
        started = time.perf_counter()
        client.get(path, headers=headers)
        times.append(time.perf_counter() - started)
    return times, queries, sql_ms, slowest, response.status_code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=int, default=2000, help="fleet services wanted (2000)")
    parser.add_argument("--requests", type=int, default=50, help="timed requests per page (50)")
    args = parser.parse_args()

    _setup_django()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import setup_test_environment
    from django.urls import Resolver404, resolve

    from ledger.demo import fleet_slug
    from ledger.models import Event, Revision, Service

    setup_test_environment()  # lets the test Client's "testserver" host through ALLOWED_HOSTS
    print(f"database: {connection.vendor} {connection.settings_dict['NAME']}")
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"machine: {os.cpu_count()} CPUs, load average {load}; {args.requests} requests a page")
    fleet = Service.objects.filter(slug__startswith="fleet-").count()
    if fleet < args.scale:
        print(f"{fleet} fleet services; seeding up to {args.scale} (seed_demo --scale) …")
        call_command("seed_demo", scale=args.scale, quiet_logins=True)
    print(
        f"data: {Service.objects.count()} services, {Revision.objects.count()} revisions, "
        f"{Event.objects.count()} events"
    )

    client = Client()
    client.force_login(get_user_model().objects.get(username="owner"))
    middle = fleet_slug(max(1, args.scale // 2))
    pages = [
        ("catalog", "/services/", {}),
        ("catalog search (htmx)", "/services/?q=fleet-01", {"HX-Request": "true"}),
        ("service page kb-assistant", "/services/kb-assistant/", {}),
        (f"service page {middle}", f"/services/{middle}/", {}),
    ]
    slow = False
    missing = 0
    for label, path, headers in pages:
        try:
            resolve(path.split("?")[0])
        except Resolver404:
            print(f"{label:<28} {path}: page missing (no URL pattern yet)")
            missing += 1
            continue
        times, queries, sql_ms, slowest, status = _measure(client, path, args.requests, headers)
        if status != 200:
            print(f"{label:<28} {path}: answered {status}, not timed")
            missing += 1
            continue
        cuts = statistics.quantiles(times, n=20, method="inclusive")
        median, p95 = statistics.median(times) * 1000, cuts[18] * 1000
        slow |= p95 >= 50
        print(
            f"{label:<28} median {median:6.1f} ms  p95 {p95:6.1f} ms  "
            f"max {max(times) * 1000:6.1f} ms  {queries:3d} queries ({sql_ms:5.1f} ms of SQL)"
        )
        if slowest and float(slowest["time"]) * 1000 >= 10:
            # Name the statement to look at: what it reads and how it filters.
            sql = slowest["sql"]
            where = sql[sql.find(" FROM ") :][:220]
            print(f"{'':<28} slowest query {float(slowest['time']) * 1000:.0f} ms: …{where}…")
    if missing:
        print(f"{missing} page(s) could not be measured")
    return 1 if slow or missing else 0


if __name__ == "__main__":
    sys.exit(main())
