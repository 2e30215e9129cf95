"""Benchmark: the daily review sweep over `seed_demo --scale 2000` with 60 days of run
evidence per service.

Measures, on the database DATABASE_URL names:

1. the batch reads (`releases.reviews.queries.review_facts.gather`) batch by batch, at two batch
   sizes: the queries of each batch, which must not grow with the services in it;
2. the whole sweep judging every service and writing nothing (`--dry-run`'s path);
3. the sweep as the beat task runs it (raising what it finds), then once more (nothing
   left to raise: the daily steady state).

Target: the sweep in under 10 s, and the same number of queries per batch whatever its
size. Exits 1 when it misses. Seeds the fleet first when the database has fewer than
`--scale` fleet services (see bench/README.md; about half an hour on a busy machine):

    DATABASE_URL=postgres://root@127.0.0.1:5432/ledger_bench \\
        .venv/bin/python bench/review_sweep.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_S = 10.0


def _setup_django() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()


def _batch_queries(ids: list[int], size: int) -> list[tuple[int, int, float]]:
    """(services, queries, seconds) of each batch's reads at `size` services a batch."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from releases.reviews.queries import review_facts

    context = review_facts.sweep_context()
    found = []
    for start in range(0, len(ids), size):
        batch = ids[start : start + size]
        with CaptureQueriesContext(connection) as captured:
            started = time.perf_counter()
            facts = review_facts.gather(batch, context=context)
            elapsed = time.perf_counter() - started
        found.append((len(facts), len(captured), elapsed))
    return found


def _sweep(**kwargs) -> tuple[float, float, int, object]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from releases.reviews.services.periodic_reviews import sweep_reviews

    with CaptureQueriesContext(connection) as captured:
        started, started_cpu = time.perf_counter(), time.process_time()
        report = sweep_reviews(**kwargs)
        wall, cpu = time.perf_counter() - started, time.process_time() - started_cpu
    return wall, cpu, len(captured), report


def _line(label: str, wall: float, cpu: float, queries: int, report) -> None:
    new = sum(1 for raised in report.raised if raised.new)
    print(
        f"  {label:<34} {wall:6.2f} s (CPU {cpu:5.2f} s), {queries:5d} queries, "
        f"{report.scanned} services in {report.batches} batches: {new} raised, "
        f"{len(report.raised) - new} added to, {len(report.overdue)} overdue"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=int, default=2000, help="fleet services wanted (2000)")
    parser.add_argument("--batch", type=int, default=250, help="services per batch (250)")
    parser.add_argument("--repeat", type=int, default=3, help="timed dry runs (3)")
    parser.add_argument(
        "--no-seed", action="store_true", help="measure what the database holds; seed nothing"
    )
    args = parser.parse_args()

    _setup_django()
    from django.core.management import call_command
    from django.db import connection

    from ledger.models import Event, RunSummary, Service
    from releases.models import Review
    from releases.reviews.queries import review_facts

    print(f"database: {connection.vendor} {connection.settings_dict['NAME']}")
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"machine: {os.cpu_count()} CPUs, load average {load}")
    fleet = Service.objects.filter(slug__startswith="fleet-")
    if not args.no_seed and fleet.count() < args.scale:
        print(f"{fleet.count()} fleet services; seeding {args.scale} …")
        call_command("seed_demo", scale=args.scale, quiet_logins=True)
    ids = review_facts.services_to_review()
    print(
        f"data: {Service.objects.count()} services ({len(ids)} with a live revision), "
        f"{RunSummary.objects.count()} run summaries, {Event.objects.count()} events, "
        f"{Review.objects.count()} reviews"
    )

    print("batch reads (review_facts.gather), queries per batch:")
    per_size = {}
    for size in (args.batch, max(1, args.batch // 5)):
        batches = _batch_queries(ids, size)
        counts = [queries for _, queries, _ in batches]
        times = [seconds for _, _, seconds in batches]
        per_size[size] = counts
        print(
            f"  {size:4d} services a batch: {len(batches)} batches, queries per batch "
            f"min {min(counts)} max {max(counts)}, median {statistics.median(times) * 1000:.0f} "
            f"ms a batch, {sum(times):.2f} s in all"
        )
    constant = max(per_size[args.batch]) <= max(per_size[max(1, args.batch // 5)])

    print("the whole sweep:")
    walls = []
    for n in range(args.repeat):
        wall, cpu, queries, report = _sweep(dry_run=True, batch_size=args.batch)
        walls.append(wall)
        _line(f"judging everything, writing nothing #{n + 1}", wall, cpu, queries, report)
    wall, cpu, queries, report = _sweep(batch_size=args.batch)
    _line("as the beat runs it", wall, cpu, queries, report)
    walls.append(wall)
    wall, cpu, queries, report = _sweep(batch_size=args.batch)
    _line("again (nothing new to raise)", wall, cpu, queries, report)
    walls.append(wall)

    slow = max(walls) >= TARGET_S
    print(
        f"target: under {TARGET_S:.0f} s — slowest {max(walls):.2f} s: "
        f"{'MISSED' if slow else 'met'}; queries per batch "
        f"{'constant' if constant else 'GROW with the batch'}"
    )
    return 1 if slow or not constant else 0


if __name__ == "__main__":
    sys.exit(main())
