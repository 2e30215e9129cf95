"""Benchmark: the FOCUS cost export of a million rows against PostgreSQL's own COPY of
the same rows, and the fleet cost page over 2,000 services and 60 days.

Targets (issue 31, "Benchmarks"): the FOCUS export (`releases.cost.focus_copy.
focus_bytes`, as `manage.py export_cost` writes it: a COPY over the stored cost) within
1.3x the time of a PostgreSQL COPY of the same rows in the same run — the export's own
rows materialized once in a table of the FOCUS columns, whose COPY writes the same
bytes — with peak memory under 300 MB; the fleet
cost page (`releases.cost.report.cost_report`) in a constant number of SQL queries
(the same at 200 services as at 2,000), its CPU time reported.

The fleet is seeded once into the database `DATABASE_URL` names (a database of its
own; rerunning skips what exists): 2,000 services of one team on one runtime (H100-80GB,
2 GPUs a replica) and one model asset, one revision each, live, with one routed replay
backend and one load test measuring its output tokens per second, a price sheet for
H100-80GB, and 60 days of gateway run summaries per service, each with 7 breakdown rows
(3 tenants and their task types, and unattributed) adding up to the day's totals. That
is 120,000 service-days and 8 FOCUS rows each (7 parts and the idle line): 960,000
rows. Rows are written in bulk (bulk_create, and INSERT … SELECT over generate_series
for the evidence), not through the services' verbs: no events are appended. The
stored cost (`releases.models.CostShare`) is then written by `record_cost`, a hundred
services at a time, as a price sheet recorded for the fleet's GPU model would write it
(its time is printed: what that price sheet's transaction costs).

Measured side by side, alternating, `--rounds` times each, medians compared:

- the export as the command writes it: `focus_bytes(since, until)` (PostgreSQL's COPY
  of the FOCUS columns from the stored rows, and the count of rows and service-days the
  command prints) written to a file, in this process (Django already up): wall and CPU
  time;
- `COPY bench_focus_rows TO STDOUT WITH (FORMAT csv, HEADER)`: the same rows, as a
  table (the target's baseline; its file must be the same bytes as the export's);
- for scale, two narrower COPYs: `COPY (SELECT slug, date, tenant, task type, tokens,
  requests of every breakdown row UNION ALL one idle row per service-day) TO STDOUT
  WITH CSV` (seven columns, a twelfth of the bytes), and the stored cost rows as they
  are (`SELECT *` of `releases_costshare`);

each through psycopg's copy, written to a file, on a connection of its own: wall time.

Then the Python writer (`focus_lines` over the stored rows) once, whose file must be
the same bytes; `manage.py export_cost` over the whole period once as a child process,
for its peak RSS (and its wall time including Django's start-up); `cost_report` over all
services and over 200 of them, its queries (CaptureQueriesContext) and CPU time. With
`--profile`, one more export under cProfile: the top 15 by cumulative time.

    createdb -h 127.0.0.1 ledger_bench_cost
    DATABASE_URL=postgres://root@127.0.0.1:5432/ledger_bench_cost \\
        .venv/bin/python manage.py migrate
    DATABASE_URL=postgres://root@127.0.0.1:5432/ledger_bench_cost \\
        .venv/bin/python bench/cost_focus.py [--rounds 3] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import hashlib
import io
import os
import pstats
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVICES = 2_000
DAYS = 60
SINCE = dt.date(2026, 9, 1)
UNTIL = SINCE + dt.timedelta(days=DAYS - 1)  # included
GPU_MODEL = "H100-80GB"
PREFIX = "cost-bench"
TEAM = "cost-bench"
# (tenant, task type, share of the day's requests and tokens in thousandths)
PARTS = (
    ("support", "chat", 260),
    ("support", "rag", 180),
    ("sales", "chat", 140),
    ("sales", "sql", 110),
    ("legal", "summarization", 120),
    ("legal", "rag", 90),
    ("unattributed", "unattributed", 100),
)
SMALL = 200
RATIO_TARGET = 1.3
MEMORY_TARGET_MB = 300


def _setup_django() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DEBUG", "true")  # the development key; queries are few
    import django

    django.setup()


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def slug(index: int) -> str:
    return f"{PREFIX}-{index:04d}"


def _seed_registry() -> None:
    """The team, runtime, asset, services, revisions, backends, load tests and the price
    sheet; each step skipped when its rows exist."""
    from django.db import connection, transaction
    from django.utils import timezone

    from ledger.demo.registry import asset_fields, image_reference
    from ledger.gateway_policy import document_sha256
    from ledger.models import (
        GatewayPolicy,
        License,
        LoadTestReport,
        ModelAsset,
        PriceSheet,
        Revision,
        Runtime,
        Service,
        Team,
    )
    from replay.models import Backend

    now = timezone.now()
    with transaction.atomic():
        team, _ = Team.objects.get_or_create(slug=TEAM, defaults={"name": "Cost benchmark"})
        license_, _ = License.objects.get_or_create(
            spdx_id="Apache-2.0", defaults={"name": "Apache License 2.0", "kind": "permissive"}
        )
        runtime = Runtime.objects.filter(name=f"{PREFIX}-vllm-h100x2").first()
        if runtime is None:
            runtime = Runtime.objects.create(
                name=f"{PREFIX}-vllm-h100x2",
                team=team,
                engine="vllm",
                engine_version="0.6.3",
                image=image_reference("registry.example.com/inference/vllm", "0.6.3"),
                launch_parameters={"max_model_len": 32768},
                gpu_model=GPU_MODEL,
                gpu_count=2,
                gpu_memory_gb=80,
            )
        asset = ModelAsset.objects.filter(name=f"{PREFIX}-model", revision="v1").first()
        if asset is None:
            fields = asset_fields(
                f"{PREFIX}-model",
                "v1",
                team=TEAM,
                family="bench",
                source=f"models.internal.example.com/bench/{PREFIX}-model",
                license="Apache-2.0",
            )
            fields.update(team=team, license=license_)
            asset = ModelAsset.objects.create(**fields)
        PriceSheet.objects.get_or_create(
            gpu_model=GPU_MODEL,
            effective_from=SINCE - dt.timedelta(days=30),
            defaults={
                "price_per_gpu_hour": Decimal("2.4500"),
                "currency": "USD",
                "note": "cost benchmark",
                "recorded_at": now,
            },
        )

    existing = set(
        Service.objects.filter(slug__startswith=f"{PREFIX}-").values_list("slug", flat=True)
    )
    missing = [i for i in range(1, SERVICES + 1) if slug(i) not in existing]
    if not missing:
        return
    print(f"creating {len(missing):,} services with a live revision each (once) …", flush=True)
    with transaction.atomic():
        services = Service.objects.bulk_create(
            Service(
                slug=slug(i),
                name=f"Cost bench {i:04d}",
                team=team,
                tier="internal",
                exposure="internal",
                tenants=["support", "sales", "legal"],
            )
            for i in missing
        )
        policies = GatewayPolicy.objects.bulk_create(
            GatewayPolicy(
                service=service,
                version=1,
                label="v1",
                document=None,
                sha256=document_sha256(None),
                note="cost benchmark",
            )
            for service in services
        )
        revisions = Revision.objects.bulk_create(
            Revision(
                service=service,
                number=1,
                model_asset=asset,
                runtime=runtime,
                context_limit=32768,
                gateway_policy=policy,
                fingerprint=f"sha256:{_sha(f'{service.slug} r1')}",
                served_at=now,
            )
            for service, policy in zip(services, policies, strict=True)
        )
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE ledger_service s SET live_revision_id = r.id FROM ledger_revision r "
                "WHERE r.service_id = s.id AND r.number = 1 AND s.id = ANY(%s)",
                [[service.pk for service in services]],
            )
        Backend.objects.bulk_create(
            Backend(
                name=f"{revision.service.slug}-vllm",
                revision=revision,
                base_url=f"http://10.9.{n // 250}.{n % 250 + 1}:8000",
                model_name=revision.service.slug,
                engine="vllm",
                routed=True,
            )
            for n, revision in enumerate(revisions)
        )
        LoadTestReport.objects.bulk_create(
            LoadTestReport(
                revision=revision,
                workload="short",
                tool="guidellm",
                format="guidellm",
                variant="benchmarks",
                source=LoadTestReport.Source.TOOL,
                raw_file=f"loadtest/{revision.pk}/cost-bench/report.json",
                raw_sha256=_sha(f"loadtest {revision.pk}"),
                raw_size=100,
                filename="report.json",
                fingerprint=revision.fingerprint,
                hardware={"gpu_model": GPU_MODEL, "gpu_count": 2},
                results={"levels": []},
                measured_at=now,
                requests=1000,
                error_rate=0.001,
                ttft_p95_ms=500.0,
                ttft_p99_ms=900.0,
                tpot_p95_ms=20.0,
                # 1,500 to 2,499 tokens/s: a day's capacity of 130 to 216 million tokens
                output_tokens_per_s=1500.0 + (revision.service_id * 37) % 1000,
            )
            for revision in revisions
        )


# The day's output tokens (20 to 139 million) and requests, from the service and day;
# a breakdown row takes its share (thousandths, the last row the remainder) so that the
# rows add up to the summary exactly.
_SUMMARIES = f"""
INSERT INTO ledger_runsummary (service_id, revision_id, date, source, requests,
    input_tokens, output_tokens, error_counts, degradations, details, recorded_at,
    ttft_p50_ms, tpot_p50_ms)
SELECT s.id, s.live_revision_id, d::date, 'gateway',
    50000 + (s.id * 7919 + (d::date - DATE '2026-01-01')::bigint * 104729) %% 150000,
    3 * (20000000 + (s.id * 15485863 + (d::date - DATE '2026-01-01')::bigint * 32452843) %% 120000000),
    20000000 + (s.id * 15485863 + (d::date - DATE '2026-01-01')::bigint * 32452843) %% 120000000,
    '{{}}', '{{}}', '{{}}', now(), 250, 25
FROM ledger_service s
CROSS JOIN generate_series(%s::date, %s::date, INTERVAL '1 day') d
WHERE s.slug LIKE '{PREFIX}-%%'
ON CONFLICT (service_id, date, source) DO NOTHING
"""  # noqa: S608 - constants of this script
_PART_ROWS = ", ".join(f"({n}, '{t}', '{k}', {w})" for n, (t, k, w) in enumerate(PARTS))
_BREAKDOWN = f"""
INSERT INTO ledger_runbreakdown (summary_id, tenant, task_type, backend, requests,
    input_tokens, output_tokens, errors_4xx, errors_5xx, error_counts, rate_limit_hits,
    timeouts, retries, degradations, truncations, refusals, structured_errors,
    returned_by_humans, ttft_p50_ms, tpot_p50_ms)
SELECT r.id, p.tenant, p.task_type, '', q.requests, q.input_tokens, q.output_tokens,
    q.requests / 200, q.requests / 500, '{{}}', 0, 0, 0, '{{}}', 0, q.requests / 300, 0,
    q.requests / 1000, 250, 25
FROM ledger_runsummary r
JOIN ledger_service s ON s.id = r.service_id AND s.slug LIKE '{PREFIX}-%%'
CROSS JOIN (VALUES {_PART_ROWS}) AS p(n, tenant, task_type, share)
CROSS JOIN LATERAL (SELECT
    CASE WHEN p.n = {len(PARTS) - 1}
        THEN r.requests - (SELECT sum(r.requests * w / 1000)
            FROM (VALUES {", ".join(f"({w})" for *_, w in PARTS[:-1])}) v(w))
        ELSE r.requests * p.share / 1000 END AS requests,
    CASE WHEN p.n = {len(PARTS) - 1}
        THEN r.input_tokens - (SELECT sum(r.input_tokens * w / 1000)
            FROM (VALUES {", ".join(f"({w})" for *_, w in PARTS[:-1])}) v(w))
        ELSE r.input_tokens * p.share / 1000 END AS input_tokens,
    CASE WHEN p.n = {len(PARTS) - 1}
        THEN r.output_tokens - (SELECT sum(r.output_tokens * w / 1000)
            FROM (VALUES {", ".join(f"({w})" for *_, w in PARTS[:-1])}) v(w))
        ELSE r.output_tokens * p.share / 1000 END AS output_tokens
) q
WHERE r.date BETWEEN %s AND %s
  AND NOT EXISTS (SELECT 1 FROM ledger_runbreakdown b WHERE b.summary_id = r.id)
"""  # noqa: S608 - constants of this script


def _seed_evidence() -> tuple[int, int]:
    """60 days of summaries and their breakdown rows; answers (service-days, rows)."""
    from django.db import connection, transaction

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_SUMMARIES, [SINCE, UNTIL])
        if cursor.rowcount:
            print(f"added {cursor.rowcount:,} run summaries (once)", flush=True)
        cursor.execute(_BREAKDOWN, [SINCE, UNTIL])
        if cursor.rowcount:
            print(f"added {cursor.rowcount:,} breakdown rows (once)", flush=True)
            cursor.execute("ANALYZE ledger_runsummary")
            cursor.execute("ANALYZE ledger_runbreakdown")
        cursor.execute(
            "SELECT count(*) FROM ledger_runsummary WHERE date BETWEEN %s AND %s",
            [SINCE, UNTIL],
        )
        days = cursor.fetchone()[0]
        cursor.execute(
            "SELECT count(*) FROM ledger_runbreakdown b JOIN ledger_runsummary r "
            "ON r.id = b.summary_id WHERE r.date BETWEEN %s AND %s",
            [SINCE, UNTIL],
        )
        breakdown = cursor.fetchone()[0]
        cursor.execute(
            "SELECT count(*) FROM ledger_runsummary r WHERE r.date BETWEEN %s AND %s AND "
            "r.output_tokens IS DISTINCT FROM (SELECT sum(output_tokens) FROM "
            "ledger_runbreakdown b WHERE b.summary_id = r.id) OR r.requests IS DISTINCT FROM "
            "(SELECT sum(requests) FROM ledger_runbreakdown b WHERE b.summary_id = r.id)",
            [SINCE, UNTIL],
        )
        if off := cursor.fetchone()[0]:
            raise SystemExit(f"{off} summaries are not the sums of their rows")
    return days, breakdown


_COPY = """COPY (
  SELECT s.slug, r.date, b.tenant, b.task_type, b.input_tokens, b.output_tokens, b.requests
  FROM ledger_runbreakdown b
  JOIN ledger_runsummary r ON r.id = b.summary_id
  JOIN ledger_service s ON s.id = r.service_id
  WHERE r.date BETWEEN %(since)s AND %(until)s
  UNION ALL
  SELECT s.slug, r.date, 'idle', '', 0, 0, 0
  FROM ledger_runsummary r
  JOIN ledger_service s ON s.id = r.service_id
  WHERE r.date BETWEEN %(since)s AND %(until)s
) TO STDOUT WITH (FORMAT csv, HEADER)"""


# The second baseline: the same rows as the export's, as they are stored (every column of
# the stored cost, no FOCUS formatting): what a COPY costs for these rows' bytes.
_COPY_STORED = """COPY (
  SELECT * FROM releases_costshare WHERE date BETWEEN %(since)s AND %(until)s AND priced
  ORDER BY service_id, date, position
) TO STDOUT WITH (FORMAT csv, HEADER)"""


# The third: the export's own rows, materialized once in a table of the FOCUS columns
# (the export's SELECT, its types kept): a COPY of exactly the rows the file holds, so
# the ratio to it is what computing them costs beyond moving them.
_FOCUS_TABLE = "bench_focus_rows"
_COPY_FOCUS_ROWS = f"COPY {_FOCUS_TABLE} TO STDOUT WITH (FORMAT csv, HEADER)"


def _materialize_focus_rows() -> None:
    """The export's rows as a table, once (unlogged: a scratch copy)."""
    from django.db import connection

    from releases.cost.focus_copy import _ORDER, _SELECT, _params

    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s)", [_FOCUS_TABLE])
        if cursor.fetchone()[0] is not None:
            return
        print("materializing the export's rows as a table (once) …", flush=True)
        cursor.execute(
            f"CREATE UNLOGGED TABLE {_FOCUS_TABLE} AS {_SELECT}{_ORDER}",
            _params(SINCE, UNTIL, None),
        )


def _copy_seconds(path: Path, query: str = _COPY) -> tuple[float, int]:
    """PostgreSQL's COPY of the rows' columns written to `path` on a connection of its
    own: wall seconds and rows (the header left out)."""
    import psycopg
    from django.db import connection

    settings = connection.settings_dict
    dsn = (
        f"host={settings['HOST']} port={settings['PORT'] or 5432} "
        f"dbname={settings['NAME']} user={settings['USER']}"
    )
    lines = 0
    started = time.perf_counter()
    with (
        psycopg.connect(dsn) as conn,
        conn.cursor() as cursor,
        cursor.copy(query, {"since": SINCE, "until": UNTIL}) as copy,
        path.open("wb") as out,
    ):
        for block in copy:
            out.write(block)
            lines += bytes(block).count(b"\n")
    return time.perf_counter() - started, lines - 1


def _seed_cost(service_days: int) -> None:
    """The stored cost of every service-day, once: `record_cost` a hundred services at
    a time (each its own transaction)."""
    from ledger.models import Service
    from releases.cost.services import record_cost
    from releases.models import CostShare

    stored = CostShare.objects.filter(
        date__gte=SINCE, date__lte=UNTIL, position=0, service__slug__startswith=f"{PREFIX}-"
    ).count()
    if stored == service_days:
        return
    ids = list(
        Service.objects.filter(slug__startswith=f"{PREFIX}-")
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    print(f"storing the cost of {service_days:,} service-days (once) …", flush=True)
    started, cpu, rows = time.perf_counter(), time.process_time(), 0
    for first in range(0, len(ids), 100):
        rows += record_cost(SINCE, UNTIL, service_ids=ids[first : first + 100]).rows
    print(
        f"record_cost: {rows:,} rows in {time.perf_counter() - started:.1f} s "
        f"(CPU {time.process_time() - cpu:.1f} s); load {_load()}",
        flush=True,
    )
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE releases_costshare")


def _export(path: Path) -> tuple[float, float, int]:
    """The FOCUS CSV as `export_cost` writes it, to `path`: wall and CPU seconds, rows."""
    from releases.cost.focus import FocusStats
    from releases.cost.focus_copy import focus_bytes

    stats = FocusStats()
    started, cpu = time.perf_counter(), time.process_time()
    with path.open("wb") as out:
        for chunk in focus_bytes(SINCE, UNTIL, None, stats):
            out.write(chunk)
    return time.perf_counter() - started, time.process_time() - cpu, stats.rows


def _python_export(path: Path) -> float:
    """The Python writer's file (`focus_lines` over the stored rows): wall seconds."""
    from releases.cost.focus import focus_lines

    started = time.perf_counter()
    with path.open("w", encoding="utf-8", newline="") as out:
        for line in focus_lines(SINCE, UNTIL):
            out.write(line)
    return time.perf_counter() - started


def _report(services: list[str] | None) -> tuple[int, float, int]:
    """cost_report over the period: its SQL queries, CPU seconds and service-days."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from releases.cost.report import cost_report

    cpu = time.process_time()
    with CaptureQueriesContext(connection) as queries:
        report = cost_report(SINCE, UNTIL, services)
    return len(queries), time.process_time() - cpu, report.service_days


def _listed(values: list[float]) -> str:
    return ", ".join(f"{value:.1f}" for value in values)


def _load() -> str:
    return ", ".join(f"{value:.1f}" for value in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--profile", action="store_true", help="one more export under cProfile: its top 15"
    )
    args = parser.parse_args()
    _setup_django()
    _seed_registry()
    service_days, breakdown = _seed_evidence()
    _seed_cost(service_days)
    _materialize_focus_rows()
    expected = breakdown + service_days
    print(
        f"{SERVICES:,} services x {DAYS} days = {service_days:,} service-days, "
        f"{breakdown:,} breakdown rows: {expected:,} FOCUS rows (7 parts + idle a day); "
        f"{os.cpu_count()} CPUs, load average {_load()}",
        flush=True,
    )
    missed = []
    with tempfile.TemporaryDirectory() as scratch:
        focus_csv, copy_csv = Path(scratch) / "focus.csv", Path(scratch) / "copy.csv"
        copies, stored_copies, focus_copies, walls, cpus = [], [], [], [], []
        focus_rows_csv = Path(scratch) / "focus_rows.csv"
        stored_csv = Path(scratch) / "stored.csv"
        for n in range(args.rounds):
            seconds, copied = _copy_seconds(copy_csv)
            copies.append(seconds)
            stored_seconds, stored_rows = _copy_seconds(stored_csv, _COPY_STORED)
            stored_copies.append(stored_seconds)
            focus_seconds, focus_rows = _copy_seconds(focus_rows_csv, _COPY_FOCUS_ROWS)
            focus_copies.append(focus_seconds)
            wall, cpu, rows = _export(focus_csv)
            walls.append(wall)
            cpus.append(cpu)
            print(
                f"round {n + 1}: COPY {seconds:.1f} s, export {wall:.1f} s "
                f"(CPU {cpu:.1f} s); load {_load()}",
                flush=True,
            )
        if rows != expected or copied != expected:
            missed.append(f"rows: export {rows:,}, COPY {copied:,}, expected {expected:,}")
        copy_s, wall_s, cpu_s = (statistics.median(v) for v in (copies, walls, cpus))
        ratio = wall_s / copy_s
        print(
            f"COPY (SELECT the rows' columns, breakdown UNION ALL idle) TO STDOUT csv: "
            f"{copied:,} rows, {copy_csv.stat().st_size / 1e6:.0f} MB, "
            f"median {copy_s:.2f} s ({_listed(copies)})"
        )
        print(
            f"focus_bytes() (COPY of the stored cost) to a file: {rows:,} rows, {focus_csv.stat().st_size / 1e6:.0f} MB, "
            f"median {wall_s:.2f} s ({_listed(walls)}), CPU {cpu_s:.2f} s ({_listed(cpus)}) "
            f"= {ratio:.2f}x the COPY of seven of their columns above",
            flush=True,
        )
        stored_s = statistics.median(stored_copies)
        print(
            "COPY of the same rows as stored (every column of releases_costshare): "
            f"{stored_rows:,} rows, {stored_csv.stat().st_size / 1e6:.0f} MB, median "
            f"{stored_s:.2f} s ({_listed(stored_copies)}): the export = "
            f"{wall_s / stored_s:.2f}x this COPY",
            flush=True,
        )

        focus_s = statistics.median(focus_copies)
        same_rows = focus_rows_csv.read_bytes() == focus_csv.read_bytes()
        print(
            f"COPY of the export's own rows materialized ({_FOCUS_TABLE}, the FOCUS "
            f"columns): {focus_rows:,} rows, {focus_rows_csv.stat().st_size / 1e6:.0f} MB, "
            f"{'the same bytes as' if same_rows else 'DIFFERS from'} the export's file, "
            f"median {focus_s:.2f} s ({_listed(focus_copies)}): the export = "
            f"{wall_s / focus_s:.2f}x this COPY (target <= {RATIO_TARGET}x)",
            flush=True,
        )
        if not same_rows:
            missed.append("the materialized rows' COPY differs from the export's file")
        if wall_s / focus_s > RATIO_TARGET:
            missed.append(f"export {wall_s / focus_s:.2f}x the COPY of its rows > {RATIO_TARGET}x")
        focus_rows_csv.unlink()

        python_csv = Path(scratch) / "python.csv"
        python_s = _python_export(python_csv)
        same_as_python = python_csv.read_bytes() == focus_csv.read_bytes()
        print(
            f"focus_lines() (the Python writer, stored rows) to a file: {python_s:.1f} s, "
            f"{'the same bytes as' if same_as_python else 'DIFFERS from'} the COPY's file",
            flush=True,
        )
        if not same_as_python:
            missed.append("the Python writer's file differs from the COPY's")
        python_csv.unlink()

        output = Path(scratch) / "export_cost.csv"
        # The child's own peak, read by /usr/bin/time: RUSAGE_CHILDREN's counts the
        # pages this (large) process had when it forked the child.
        peak_file = Path(scratch) / "peak_kb"
        timed = ["/usr/bin/time", "-f", "%M", "-o", str(peak_file)]
        started = time.perf_counter()
        subprocess.run(
            [
                *(timed if Path(timed[0]).exists() else []),
                sys.executable,
                "manage.py",
                "export_cost",
                "--since",
                SINCE.isoformat(),
                "--until",
                (UNTIL + dt.timedelta(days=1)).isoformat(),
                "--output",
                str(output),
            ],
            check=True,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
        )
        command_s = time.perf_counter() - started
        if peak_file.exists():
            peak_mb = int(peak_file.read_text().split()[-1]) // 1024
        else:
            peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024
        same = output.read_bytes() == focus_csv.read_bytes()
        print(
            f"manage.py export_cost (60 days, all services): {command_s:.1f} s including "
            f"start-up, peak RSS {peak_mb} MB (target < {MEMORY_TARGET_MB}); "
            f"{'the same bytes as' if same else 'DIFFERS from'} focus_bytes' file",
            flush=True,
        )
        if peak_mb >= MEMORY_TARGET_MB:
            missed.append(f"export_cost peak RSS {peak_mb} MB >= {MEMORY_TARGET_MB} MB")
        if not same:
            missed.append("export_cost's file differs from focus_bytes'")

        if args.profile:
            profiler = cProfile.Profile()
            profiler.enable()
            _export(focus_csv)
            profiler.disable()
            text = io.StringIO()
            pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(15)
            print("one export under cProfile, top 15 by cumulative time:")
            print(text.getvalue().strip())

    from ledger.models import Service

    some = list(
        Service.objects.filter(slug__startswith=f"{PREFIX}-")
        .order_by("slug")
        .values_list("slug", flat=True)[:SMALL]
    )
    all_queries, all_cpu, all_days = _report(None)
    some_queries, some_cpu, some_days = _report(some)
    print(
        f"cost_report, every service ({all_days:,} service-days): {all_queries} queries, "
        f"CPU {all_cpu:.1f} s; {SMALL} services ({some_days:,} service-days): "
        f"{some_queries} queries, CPU {some_cpu:.2f} s; load {_load()}"
    )
    if all_queries != some_queries:
        missed.append(f"cost_report queries {all_queries} at all vs {some_queries} at {SMALL}")
    for line in missed:
        print(f"MISSED: {line}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
