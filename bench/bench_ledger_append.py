"""Benchmark: events appended per second by concurrent writers, then the chain verified.

N writer processes (8 by default), each with its own database connection,
append events through `ledger.chain.append_event`, one per
`transaction.atomic()` (as most domain verbs do; `--per-transaction K` appends
K per transaction, as a verb that records several changes does). Prints events/s and
per-append latency, then recomputes the whole chain with `verify_chain()` (every
hash and every signature) and prints that it is linear: as many events as the last
sequence number, no gap, every link matching; then takes a checkpoint and times
`verify_ledger()`, which checks only the signatures after the checkpoint's mark.
Target: at least 1,000 events/s on PostgreSQL.

Run it against a database made for it (the events stay: the ledger is
append-only), see bench/README.md:

    DATABASE_URL=postgres://root@127.0.0.1:5432/ledger_bench \\
        .venv/bin/python bench/bench_ledger_append.py --events 20000
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _setup_django() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()


def _writer(worker: int, count: int, per_transaction: int, barrier, results) -> None:
    _setup_django()
    from django.db import connection, transaction

    from ledger.chain import append_event

    connection.ensure_connection()
    latencies = []
    barrier.wait()
    for first in range(0, count, per_transaction):
        started = time.perf_counter()
        with transaction.atomic():
            for number in range(first, min(first + per_transaction, count)):
                append_event(
                    actor=None,
                    action="bench.appended",
                    subject=("bench.writer", str(worker)),
                    payload={"writer": worker, "number": number},
                )
        latencies.append(time.perf_counter() - started)
    connection.close()
    results.put((worker, latencies))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=16000, help="events in total (16000)")
    parser.add_argument("--writers", type=int, default=8, help="writer processes (8)")
    parser.add_argument("--per-transaction", type=int, default=1, help="events per transaction (1)")
    args = parser.parse_args()

    _setup_django()
    from django.db import connection

    from ledger.chain import verify_chain
    from ledger.models import Event

    print(f"database: {connection.vendor} {connection.settings_dict['NAME']}")
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"machine: {os.cpu_count()} CPUs, load average {load} (writers share them)")
    if connection.vendor != "postgresql":
        print("note: the target figure is for PostgreSQL; SQLite admits one writer at a time")
    before = Event.objects.count()
    connection.close()

    per_writer = [args.events // args.writers] * args.writers
    for index in range(args.events % args.writers):
        per_writer[index] += 1
    context = mp.get_context("spawn")
    barrier = context.Barrier(args.writers + 1)
    results = context.Queue()
    processes = [
        context.Process(
            target=_writer, args=(worker, count, args.per_transaction, barrier, results)
        )
        for worker, count in enumerate(per_writer)
    ]
    for process in processes:
        process.start()
    barrier.wait()  # every writer is connected: start the clock
    started = time.perf_counter()
    latencies: list[float] = []
    for _ in processes:
        _, worker_latencies = results.get()
        latencies.extend(worker_latencies)
    elapsed = time.perf_counter() - started
    for process in processes:
        process.join()
    if any(process.exitcode for process in processes):
        print("a writer failed; see its traceback above")
        return 1

    rate = args.events / elapsed
    cuts = statistics.quantiles(latencies, n=100, method="inclusive")
    print(
        f"appended {args.events} events from {args.writers} writers, "
        f"{args.per_transaction} per transaction, in {elapsed:.2f} s: "
        f"{rate:,.0f} events/s (target ≥ 1,000)"
    )
    print(
        f"per transaction (wait for the chain lock, head, insert, commit): "
        f"p50 {cuts[49] * 1000:.1f} ms, p95 {cuts[94] * 1000:.1f} ms, p99 {cuts[98] * 1000:.1f} ms"
    )

    started = time.perf_counter()
    report = verify_chain()
    took = time.perf_counter() - started
    last = Event.objects.order_by("-sequence").values_list("sequence", flat=True).first() or 0
    added = report.count - before
    linear = report.ok and report.count == last and added == args.events
    print(
        f"verify_chain: {'ok' if report.ok else 'BROKEN'}, {report.count} events "
        f"(+{added} now), last sequence {last}, head {report.head_hash[:16]}… ({took:.1f} s)"
    )
    if linear:
        print("chain is linear: one event per sequence number 1..last, no gap, no fork")
    else:
        print(f"chain is NOT linear: {report.problem or 'count and last sequence differ'}")

    # What verify_ledger does once a checkpoint vouches for the signatures it saw: every
    # hash recomputed, only the signatures after its mark checked.
    from ledger.checkpoints import take_checkpoint, verify_ledger

    started = time.perf_counter()
    checkpoint = take_checkpoint(reason="benchmark")
    took_checkpoint = time.perf_counter() - started
    started = time.perf_counter()
    ledger = verify_ledger()
    took_ledger = time.perf_counter() - started
    print(
        f"take_checkpoint: signatures hold through #{checkpoint.signed_through} "
        f"({took_checkpoint:.1f} s); then verify_ledger: {'ok' if ledger.ok else 'BROKEN'}, "
        f"signatures checked from #{ledger.chain.signatures_from} ({took_ledger:.1f} s)"
    )
    return 0 if linear and rate >= 1000 else 1


if __name__ == "__main__":
    sys.exit(main())
