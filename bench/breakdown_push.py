"""Benchmark: one day's run-summary push with 10,000 breakdown rows (issue 31).

A service of its own (`bench-breakdown-<time>`: 10 tenants, 20 task types) gets
days of 10,000 rows — one per tenant, task type and backend (50 backends) —
whose requests, tokens and error counts add up to the day's totals, pushed
through `services.record_run_summary` as the gateway's account:

- a new day (`recorded`), several times, each on a day of its own;
- the same day with other rows (`replaced`: the old rows deleted, the new ones
  written) and the same rows again (`unchanged`);
- once through the API with the test Client (the JSON body parsed, the view,
  the answer), to show the request body size is admitted.

For each: wall time, this process's CPU time, SQL statements, and how many
transactions wrote (every INSERT, UPDATE and DELETE inside one atomic block).
Target: a new day under 1 s, in one transaction. Exits 1 when it misses.

    createdb -h 127.0.0.1 ledger_bench_bd
    DEBUG=true DATABASE_URL=postgres://root@127.0.0.1:5432/ledger_bench_bd .venv/bin/python manage.py migrate
    DEBUG=true DATABASE_URL=postgres://root@127.0.0.1:5432/ledger_bench_bd \\
        .venv/bin/python bench/breakdown_push.py [--rows 10000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TARGET_S = 1.0
TENANTS = [f"tenant-{n:02d}" for n in range(10)]
TASK_TYPES = [f"task-{n:02d}" for n in range(20)]


def _setup_django() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()


def _rows(count: int, seed: int) -> list[dict[str, Any]]:
    """`count` rows, each its own (tenant, task type, backend), counts varying with `seed`."""
    per_backend = len(TENANTS) * len(TASK_TYPES)
    rows = []
    for index in range(count):
        requests = 200 + (index * 7 + seed) % 900
        rows.append(
            {
                "tenant": TENANTS[index % len(TENANTS)],
                "task_type": TASK_TYPES[(index // len(TENANTS)) % len(TASK_TYPES)],
                "backend": f"vllm-{index // per_backend:03d}",
                "requests": requests,
                "input_tokens": requests * 850,
                "output_tokens": requests * 240,
                "error_counts": {"429": index % 3, "503": (index + seed) % 2},
                "rate_limit_hits": index % 3,
                "timeouts": index % 2,
                "retries": index % 4,
                "degradations": {"shorter-context": index % 5},
                "truncations": index % 6,
                "refusals": index % 3,
                "structured_errors": index % 2,
                "returned_by_humans": int(index % 7 == 0),
                "latency": {
                    "ttft_p50_ms": 150.0 + index % 50,
                    "ttft_p95_ms": 500.0 + index % 50,
                    "ttft_p99_ms": 900.0 + index % 50,
                    "tpot_p50_ms": 15.0,
                    "tpot_p95_ms": 24.0,
                    "tpot_p99_ms": 30.0,
                },
            }
        )
    return rows


def _day(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The day's totals as the gateway sends them, beside its rows."""
    requests = sum(row["requests"] for row in rows)
    codes = {code: sum(row["error_counts"][code] for row in rows) for code in ("429", "503")}
    return {
        "requests": requests,
        "input_tokens": sum(row["input_tokens"] for row in rows),
        "output_tokens": sum(row["output_tokens"] for row in rows),
        "error_counts": codes,
        "rate_4xx": codes["429"] / requests,
        "rate_5xx": codes["503"] / requests,
        "ttft_p50_ms": 180.0,
        "ttft_p95_ms": 620.0,
        "ttft_p99_ms": 1100.0,
        "breakdown": rows,
    }


@contextmanager
def _statements() -> Iterator[dict[str, int]]:
    """Counts the SQL statements, and the transactions that wrote: a write outside any
    atomic block, or the first write of each outermost atomic block."""
    from django.db import connection

    counts = {"statements": 0, "writing_transactions": 0}
    state = {"block": None, "blocks": 0}

    def wrapper(execute, sql, params, many, context):
        counts["statements"] += 1
        writes = sql.lstrip().split(None, 1)[0].upper() in {"INSERT", "UPDATE", "DELETE"}
        if not connection.in_atomic_block:
            state["block"] = None
            counts["writing_transactions"] += writes
        else:
            if state["block"] is None:
                state["blocks"] += 1
                state["block"] = (state["blocks"], False)
            number, wrote = state["block"]
            if writes and not wrote:
                counts["writing_transactions"] += 1
                state["block"] = (number, True)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(wrapper):
        yield counts


def _measure(call: Callable[[], Any]) -> tuple[float, float, dict[str, int], Any]:
    with _statements() as counts:
        started, started_cpu = time.perf_counter(), time.process_time()
        result = call()
        wall, cpu = time.perf_counter() - started, time.process_time() - started_cpu
    return wall, cpu, counts, result


def _line(label: str, wall: float, cpu: float, counts: dict[str, int], outcome: str) -> None:
    print(
        f"  {label:<34} {wall * 1000:7.1f} ms wall  {cpu * 1000:7.1f} ms CPU  "
        f"{counts['statements']:3d} statements  {counts['writing_transactions']} writing "
        f"transaction(s)  [{outcome}]"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000, help="rows per day (10000)")
    parser.add_argument("--repeat", type=int, default=5, help="new days pushed (5)")
    args = parser.parse_args()

    _setup_django()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.utils import timezone
    from rest_framework.authtoken.models import Token

    from ledger import services
    from ledger.models import RunBreakdown, Team

    settings.DEBUG = False  # as deployed: no query log kept
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    print(f"database: {connection.vendor} {connection.settings_dict['NAME']}")
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"machine: {os.cpu_count()} CPUs, load average {load}")

    gateway, _ = get_user_model().objects.get_or_create(
        username="bench-gateway", defaults={"is_superuser": True, "is_staff": True}
    )
    slug = f"bench-breakdown-{int(time.time())}"
    service = services.create_service(
        actor=None,
        slug=slug,
        name=slug,
        team=Team.objects.get_or_create(slug="bench-team", defaults={"name": "Bench team"})[0],
        tenants=TENANTS,
        task_types=TASK_TYPES,
    )
    today = timezone.now().astimezone(dt.UTC).date()
    body_bytes = len(json.dumps(_day(_rows(args.rows, 0))).encode())
    print(
        f"service {slug}: {len(TENANTS)} tenants, {len(TASK_TYPES)} task types; "
        f"{args.rows} rows a day, a JSON body of {body_bytes / 1e6:.2f} MB "
        f"(DATA_UPLOAD_MAX_MEMORY_SIZE {settings.DATA_UPLOAD_MAX_MEMORY_SIZE / 1e6:.2f} MB)"
    )

    def push(date: dt.date, seed: int) -> Callable[[], Any]:
        fields = _day(_rows(args.rows, seed))
        return lambda: services.record_run_summary(service, actor=gateway, date=date, **fields)

    print("record_run_summary (statements as Django's query log sees them; a write's rows are")
    print("one COPY more):")
    walls: list[float] = []
    cpus: list[float] = []
    writes: set[int] = set()
    for back in range(1, args.repeat + 1):
        wall, cpu, counts, (_, outcome) = _measure(push(today - dt.timedelta(days=back), 0))
        _line(f"new day {back}", wall, cpu, counts, outcome)
        walls.append(wall)
        cpus.append(cpu)
        writes.add(counts["writing_transactions"])
    yesterday = today - dt.timedelta(days=1)
    _line("the same day, other rows", *_measure(push(yesterday, 1))[:3], "replaced")
    wall, cpu, counts, (_, outcome) = _measure(push(yesterday, 1))
    _line("the same day and rows again", wall, cpu, counts, outcome)
    stored = RunBreakdown.objects.filter(summary__service=service, summary__date=yesterday)
    print(f"  rows stored for {yesterday}: {stored.count()}")

    token, _ = Token.objects.get_or_create(user=gateway)
    client = Client(headers={"Authorization": f"Token {token.key}"})
    url = f"/api/services/{slug}/run-summaries/"

    def post(back: int, rows: int) -> Callable[[], Any]:
        date = (today - dt.timedelta(days=back)).isoformat()
        body = json.dumps({"date": date, **_day(_rows(rows, 2))})
        return lambda: client.post(url, body, content_type="application/json")

    print("through the API (test Client: middleware, JSON parser, view, answer):")
    post(args.repeat + 1, 1)()  # warm-up: URL resolvers, the parser, the serializers
    statuses = set()
    for back in range(args.repeat + 2, args.repeat + 5):
        wall, cpu, counts, response = _measure(post(back, args.rows))
        _line(f"POST a new day {back}", wall, cpu, counts, f"HTTP {response.status_code}")
        statuses.add(response.status_code)
        if response.status_code != 201:
            print(f"  {response.content[:300]!r}")

    median = statistics.median(walls)
    print(
        f"new day: median {median * 1000:.1f} ms wall, {statistics.median(cpus) * 1000:.1f} ms "
        f"CPU over {len(walls)}; writing transactions per push: {sorted(writes)}"
    )
    missed = median >= TARGET_S or writes != {1} or statuses != {201}
    print("target (< 1 s, one transaction): " + ("missed" if missed else "met"))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
