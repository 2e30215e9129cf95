"""Benchmark: OTLP trace ingest (issue 33), batches of 512 model-call spans.

Exports of 512 spans each (every span a chat call with the GenAI attributes a gateway
sets, plus the prompt and completion the ingest must drop), as protobuf gzip — what the
SDK exporter sends — posted one after another by one client to
`POST /api/otlp/v1/traces` through Django's whole request stack in this process (the
test Client: middleware, token, view; no socket), into PostgreSQL's day partitions.

Prints spans per second over the run (wall and this process's CPU), the time split of
one batch (inflate + decode, extract, store), and the peak RSS, which must stay flat
as batches go by (bounded memory). Target: at least 5,000 spans/s. Exits 1 when missed.

    createdb -h 127.0.0.1 ledger_bench_otlp
    DEBUG=true DATABASE_URL=postgres://root@127.0.0.1:5432/ledger_bench_otlp .venv/bin/python manage.py migrate
    DEBUG=true DATABASE_URL=postgres://root@127.0.0.1:5432/ledger_bench_otlp \\
        .venv/bin/python bench/otlp_ingest.py [--batches 100]
"""

from __future__ import annotations

import argparse
import gzip
import os
import resource
import secrets
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_SPANS_PER_S = 5_000
BATCH = 512


def _setup_django() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()


def _batch(now_ns: int) -> bytes:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

    def kv(key: str, value: object) -> KeyValue:
        if isinstance(value, int):
            return KeyValue(key=key, value=AnyValue(int_value=value))
        return KeyValue(key=key, value=AnyValue(string_value=str(value)))

    spans = []
    for n in range(BATCH):
        start = now_ns - (BATCH - n) * 1_000_000
        spans.append(
            Span(
                trace_id=secrets.token_bytes(16),
                span_id=secrets.token_bytes(8),
                name="chat Model-2-7B-Instruct",
                kind=Span.SPAN_KIND_CLIENT,
                start_time_unix_nano=start,
                end_time_unix_nano=start + 900_000_000,
                attributes=[
                    kv("gen_ai.operation.name", "chat"),
                    kv("gen_ai.request.model", "Model-2-7B-Instruct"),
                    kv("gen_ai.response.model", "Model-2-7B-Instruct"),
                    kv("server.address", "kb-vllm.internal"),
                    kv("server.port", 8000),
                    kv("gen_ai.usage.input_tokens", 800 + n),
                    kv("gen_ai.usage.output_tokens", 150 + n % 50),
                    kv("ledger.service", "kb-assistant"),
                    kv("ledger.tenant", ("support", "sales", "field-service")[n % 3]),
                    kv("ledger.task_type", "chat"),
                    kv("gen_ai.input.messages", '[{"role":"user","content":"' + "x" * 400 + '"}]'),
                    kv("gen_ai.output.messages", '[{"role":"assistant","content":"y"}]'),
                ],
            )
        )
    request = ExportTraceServiceRequest(
        resource_spans=[
            ResourceSpans(
                resource={"attributes": [kv("service.name", "bench-gateway")]},
                scope_spans=[ScopeSpans(spans=spans)],
            )
        ]
    )
    return gzip.compress(request.SerializeToString())


def _token() -> str:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from rest_framework.authtoken.models import Token

    user, _ = get_user_model().objects.get_or_create(username="bench-otlp")
    user.groups.add(Group.objects.get_or_create(name="trace_ingest")[0])
    return Token.objects.get_or_create(user=user)[0].key


def _split(body: bytes) -> tuple[float, float, float]:
    """One batch's stages, timed apart: inflate + decode, extract, store."""
    from django.db import transaction

    from ledger.traces import otlp
    from ledger.traces.services import record_spans

    started = time.perf_counter()
    request = otlp.decode(otlp.inflate(body, "gzip", 64 << 20), otlp.PROTOBUF)
    decoded = time.perf_counter()
    extracted = otlp.extract(request)
    done = time.perf_counter()
    with transaction.atomic():
        record_spans(extracted)
        transaction.set_rollback(True)  # timed, not kept
    return decoded - started, done - decoded, time.perf_counter() - done


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=100)
    args = parser.parse_args()
    _setup_django()
    from django.test import Client

    token = _token()
    client = Client(HTTP_HOST="localhost")
    now_ns = time.time_ns()
    bodies = [_batch(now_ns + i) for i in range(args.batches)]
    print(
        f"{args.batches} batches of {BATCH} spans, {sum(map(len, bodies)) / len(bodies) / 1024:.0f} "
        f"KiB each gzipped; load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    decode_s, extract_s, store_s = _split(bodies[0])
    peaks = []
    started, cpu = time.perf_counter(), time.process_time()
    for n, body in enumerate(bodies):
        response = client.post(
            "/api/otlp/v1/traces",
            body,
            content_type="application/x-protobuf",
            HTTP_CONTENT_ENCODING="gzip",
            HTTP_AUTHORIZATION=f"Token {token}",
        )
        if response.status_code != 200 or response.content:
            print(f"batch {n}: {response.status_code} {response.content[:200]!r}")
            return 1
        if n in (args.batches // 4, args.batches - 1):
            peaks.append(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    spans = args.batches * BATCH
    rate = spans / wall
    print(
        f"one batch: inflate + decode {decode_s * 1000:.0f} ms, extract {extract_s * 1000:.0f} ms, store {store_s * 1000:.0f} ms"
    )
    print(
        f"{spans:,} spans in {wall:.1f} s: {rate:,.0f} spans/s wall, {spans / cpu:,.0f} spans/s "
        f"of this process's CPU (target >= {TARGET_SPANS_PER_S:,}); peak RSS after a quarter "
        f"{peaks[0]:.0f} MB, at the end {peaks[-1]:.0f} MB; load {os.getloadavg()[0]:.1f}"
    )
    if rate < TARGET_SPANS_PER_S:
        print(f"MISSED: {rate:,.0f} spans/s < {TARGET_SPANS_PER_S:,}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
