"""Benchmark: explain a trace of 20 model calls over 5 million stored spans (issue 33).

Seeds once, into the database DATABASE_URL names: the demo (`seed_demo`), then
5,000,000 model-call spans over the last 30 days (one day partition each, written by
one `INSERT … SELECT FROM generate_series` per day), then one trace of 20 calls to
kb-assistant's live backend, half of them while a gray share would be in force.
Times `releases.explain.queries.explain_trace` on that trace (this process's CPU, and
the SQL statements), and on a trace of 2 calls to show the statements do not grow.

Target: under 30 ms of CPU for the 20 calls, the same statements as for 2. Exits 1
when missed.

    createdb -h 127.0.0.1 ledger_bench_explain
    DEBUG=true DATABASE_URL=postgres://root@127.0.0.1:5432/ledger_bench_explain .venv/bin/python manage.py migrate
    DEBUG=true DATABASE_URL=postgres://root@127.0.0.1:5432/ledger_bench_explain \\
        .venv/bin/python bench/explain_trace.py [--spans 5000000] [--rounds 20]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
TARGET_CPU_MS = 30.0
DAYS = 30
BIG, SMALL = "b1" * 16, "5a" * 16


def _setup_django() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()


def _seed_spans(total: int) -> None:
    from django.db import connection, transaction
    from django.utils import timezone

    from ledger.traces import partitions

    today = timezone.now().astimezone(dt.UTC).date()
    days = [today - dt.timedelta(days=n) for n in range(DAYS)]
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM ledger_modelcallspan WHERE resource_service = 'bench'")
        if cursor.fetchone()[0] >= (total // DAYS) * DAYS:
            return
    print(f"seeding {total:,} spans over {DAYS} days (once) …", flush=True)
    started = time.perf_counter()
    per_day = total // DAYS
    for n, day in enumerate(days):
        with transaction.atomic(), connection.cursor() as cursor:
            partitions.ensure([day])
            cursor.execute(
                "INSERT INTO ledger_modelcallspan (started_at, trace_id, span_id, parent_span_id, "
                "name, duration_ms, operation, request_model, response_model, server_address, "
                "server_port, input_tokens, output_tokens, finish_reasons, error_type, ttft_ms, "
                "latency_ms, service_slug, tenant, task_type, gateway_policy_version, degradation, "
                "retry_count, resource_service) "
                "SELECT %s::timestamptz + (g %% 86000) * interval '1 second', md5(%s || g), "
                "substr(md5('s' || g), 1, 16), '', 'chat', 900, 'chat', 'Model', 'Model', "
                "'kb-vllm.internal', 8000, 800, 150, '[\"stop\"]', '', 200, '{}', 'kb-assistant', "
                "'support', 'chat', '', '', 0, 'bench' FROM generate_series(1, %s) g",
                [dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC), f"d{n}-", per_day],
            )
        print(f"  {day}: {per_day:,} spans", flush=True)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE ledger_modelcallspan")
    print(f"seeded in {time.perf_counter() - started:.0f} s", flush=True)


def _seed_trace(trace_id: str, calls: int) -> None:
    from django.utils import timezone

    from ledger.models import ModelCallSpan, Service
    from ledger.traces.otlp import Extracted, SpanFacts
    from ledger.traces.services import record_spans
    from replay.models import Backend

    ModelCallSpan.objects.filter(trace_id=trace_id).delete()  # made again at each run: now
    service = Service.objects.get(slug="kb-assistant")
    backend = Backend.objects.filter(revision=service.live_revision).order_by("name").first()
    if backend is None:
        raise SystemExit("kb-assistant's live revision has no backend: seed the demo first")
    url = urlsplit(backend.base_url)
    # Just before now: what the chain says is live now served them.
    started = timezone.now() - dt.timedelta(seconds=calls + 1)
    record_spans(
        Extracted(
            spans=[
                SpanFacts(
                    trace_id=trace_id,
                    span_id=f"{n + 1:016x}",
                    parent_span_id="",
                    name="chat",
                    started_at=started + dt.timedelta(seconds=n),
                    duration_ms=900.0,
                    operation="chat",
                    request_model=backend.model_name,
                    response_model=backend.model_name,
                    server_address=url.hostname or "",
                    server_port=url.port,
                    service_slug="kb-assistant",
                    tenant="support",
                    task_type="chat",
                    retry_count=n % 2,
                )
                for n in range(calls)
            ]
        )
    )


def _explain(trace_id: str, rounds: int) -> tuple[float, int, str]:
    from django.db import connection, reset_queries
    from django.test.utils import CaptureQueriesContext

    from releases.explain.queries import explain_trace

    cpu = []
    for _ in range(rounds):
        started = time.process_time()
        calls = explain_trace(trace_id)
        cpu.append((time.process_time() - started) * 1000)
    reset_queries()  # the seeding filled the log: a full log counts nothing new
    with CaptureQueriesContext(connection) as captured:
        calls = explain_trace(trace_id)
    kinds = ", ".join(sorted({c.approved_as for c in calls}))
    return statistics.median(cpu), len(captured), f"{len(calls)} calls ({kinds})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=5_000_000)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    _setup_django()
    from django.core.management import call_command

    from ledger.models import Service

    if not Service.objects.filter(slug="kb-assistant").exists():
        print("seeding the demo (once) …", flush=True)
        call_command("seed_demo", verbosity=0)
    _seed_spans(args.spans)
    _seed_trace(BIG, 20)
    _seed_trace(SMALL, 2)
    big_cpu, big_queries, big_said = _explain(BIG, args.rounds)
    small_cpu, small_queries, small_said = _explain(SMALL, args.rounds)
    print(
        f"explain_trace, {big_said}: median CPU {big_cpu:.1f} ms, {big_queries} queries "
        f"(target < {TARGET_CPU_MS:.0f} ms); {small_said}: {small_cpu:.1f} ms, "
        f"{small_queries} queries; load {os.getloadavg()[0]:.1f}"
    )
    missed = []
    if big_cpu >= TARGET_CPU_MS:
        missed.append(f"CPU {big_cpu:.1f} ms >= {TARGET_CPU_MS:.0f} ms")
    if big_queries != small_queries:
        missed.append(f"queries {big_queries} for 20 calls, {small_queries} for 2")
    if missed:
        print("MISSED: " + "; ".join(missed))
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
