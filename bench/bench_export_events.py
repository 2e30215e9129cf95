"""Benchmark: exporting a million events as CSV against PostgreSQL's own COPY, and
verifying a bundle of them offline.

Targets (issue 14): the events' CSV streamed within 1.2x the time of
`COPY (SELECT the same columns) TO STDOUT` in the same run, with peak memory under
300 MB; `scripts/verify_bundle.py` on a bundle of the same events under 30 s.

The export is timed as the Celery worker runs it: `record_chunks` of the events in a
process that is already up, read to the end, alternating with the plain COPY
(`--rounds` times each; medians compared). `manage.py export_audit --format csv` is
also run once as a whole, for its peak memory and its wall time including Django's
start-up (which an export requested on the Audit page never pays).

The events are appended directly with COPY, their hashes chained from the current
head as `ledger.chain` computes them and signed with the ledger's key, so the chain
stays valid. Use a database of
its own (they stay: the table is append-only):

    createdb -h 127.0.0.1 ledger_bench_export
    DATABASE_URL=postgres://root@127.0.0.1:5432/ledger_bench_export \\
        .venv/bin/python bench/bench_export_events.py --events 1000000
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SINCE = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _setup_django() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()


def _fill(wanted: int) -> int:
    """Append events until the chain holds `wanted`; answer how many it holds."""
    from django.db import connection, transaction

    from ledger.chain import GENESIS_HASH, canonical_json, compute_hash
    from ledger.models import Event
    from ledger.signing import sign_event_hash

    head = Event.objects.order_by("-sequence").values_list("sequence", "hash").first()
    sequence, prev = head or (0, GENESIS_HASH)
    missing = wanted - sequence
    if missing <= 0:
        return sequence
    print(f"appending {missing:,} events (once) …", flush=True)
    columns = (
        "sequence, created_at, actor_label, action, subject_type, subject_id, "
        "subject_label, payload, prev_hash, hash, key_id, signature"
    )
    with (
        transaction.atomic(),
        connection.cursor() as cursor,
        cursor.cursor.copy(f"COPY ledger_event ({columns}) FROM STDIN") as copy,
    ):
        for n in range(sequence + 1, wanted + 1):
            created = SINCE + dt.timedelta(seconds=n * 10)
            payload = canonical_json({"after": {"name": f"service {n % 997}"}, "n": n})
            digest = compute_hash(
                sequence=n,
                created_at=created,
                actor_label="bench",
                action="service.updated",
                subject_type="ledger.service",
                subject_id=str(n % 997),
                payload=payload,
                prev_hash=prev,
            )
            copy.write_row(
                (
                    n,
                    created,
                    "bench",
                    "service.updated",
                    "ledger.service",
                    str(n % 997),
                    f"service-{n % 997}",
                    payload,
                    prev,
                    digest,
                    *sign_event_hash(digest),
                )
            )
            prev = digest
    return wanted


def _copy_seconds(until: dt.datetime) -> float:
    """PostgreSQL's COPY of the raw columns, read to the end on a connection of its own."""
    import psycopg
    from django.db import connection

    settings = connection.settings_dict
    dsn = f"host={settings['HOST']} port={settings['PORT'] or 5432} dbname={settings['NAME']} user={settings['USER']}"
    query = (
        "COPY (SELECT e.sequence, e.created_at, e.actor_label, e.action, e.subject_type, "
        "e.subject_id, e.subject_label, s.slug, e.payload, e.prev_hash, e.hash "
        "FROM ledger_event e LEFT JOIN ledger_service s ON s.id = e.service_id "
        "WHERE e.created_at >= %s AND e.created_at < %s "
        "ORDER BY e.sequence) TO STDOUT WITH (FORMAT csv, HEADER)"
    )
    size = 0
    started = time.perf_counter()
    with (
        psycopg.connect(dsn) as conn,
        conn.cursor() as cursor,
        cursor.copy(query, (SINCE, until)) as copy,
    ):
        for row in copy:  # only counted: the reference does no more than read
            size += len(row)
    return time.perf_counter() - started


def _export_seconds(until: dt.datetime) -> tuple[float, int]:
    """The events' CSV as an export writes it (`record_chunks`), read to the end: the
    seconds and the bytes."""
    from releases.audit.records import RECORD_TYPES, AuditFilters
    from releases.audit.services.exports import record_chunks

    filters = AuditFilters(since=SINCE, until=until)
    size = 0
    started = time.perf_counter()
    for chunk in record_chunks(RECORD_TYPES["events"], filters, "csv"):
        size += len(chunk)
    return time.perf_counter() - started, size


def _run(argv: list[str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (MB) of a child process."""
    started = time.perf_counter()
    subprocess.run(argv, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    seconds = time.perf_counter() - started
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return seconds, peak_kb // 1024


def _listed(seconds: list[float]) -> str:
    return ", ".join(f"{value:.2f}" for value in seconds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--csv-only", action="store_true", help="skip the commands, the bundle and its check"
    )
    args = parser.parse_args()
    _setup_django()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    held = _fill(args.events)
    until = SINCE + dt.timedelta(seconds=(held + 1) * 10)
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"{held:,} events; {os.cpu_count()} CPUs, load average {load}")

    copies, exports = [], []
    for _ in range(args.rounds):
        copies.append(_copy_seconds(until))
        seconds, size = _export_seconds(until)
        exports.append(seconds)
    copy_s, export_s = statistics.median(copies), statistics.median(exports)
    ratio = export_s / copy_s
    print(f"COPY … TO STDOUT (csv), raw columns: median {copy_s:.2f} s ({_listed(copies)})")
    print(
        f"events.csv as exported ({size / 1e6:.0f} MB): median {export_s:.2f} s "
        f"({_listed(exports)}) = {ratio:.2f}x COPY (target <= 1.2x)"
    )
    if args.csv_only:
        return 1 if ratio > 1.2 else 0
    python = sys.executable
    with tempfile.TemporaryDirectory() as scratch:
        period = ["--since", SINCE.isoformat(), "--until", until.isoformat()]
        csv_s, csv_mb = _run(
            [python, "manage.py", "export_audit", *period, "--format", "csv", "--output", scratch]
        )
        bundle = Path(scratch) / "bundle.zip"
        bundle_s, bundle_mb = _run(
            [
                python,
                "manage.py",
                "export_audit",
                *period,
                "--format",
                "bundle",
                "--output",
                str(bundle),
            ]
        )
        key = Path(scratch) / "key.pem"
        key.write_text(
            subprocess.run(
                [python, "manage.py", "signing_key"],
                check=True,
                cwd=ROOT,
                capture_output=True,
                text=True,
            ).stdout
        )
        verify_s, _ = _run([python, "scripts/verify_bundle.py", str(bundle), "--key", str(key)])
    print(
        f"manage.py export_audit --format csv: {csv_s:.2f} s including start-up, "
        f"peak RSS <= {csv_mb} MB (target < 300)"
    )
    print(f"manage.py export_audit --format bundle: {bundle_s:.2f} s, peak RSS <= {bundle_mb} MB")
    print(f"scripts/verify_bundle.py: {verify_s:.2f} s (target < 30 s)")
    missed = ratio > 1.2 or csv_mb >= 300 or verify_s >= 30
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
