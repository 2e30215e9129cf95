"""Export a period's records for an auditor: CSV or JSON Lines files (one per record type
of `releases.audit.records`: releases, sign-offs, waivers, rollbacks, reviews, revisions,
gateway policy versions, events) and the period's cost as FinOps FOCUS 1.0 CSV
(`cost-focus.csv`, releases/cost/focus.py), or an evidence bundle that proves itself
offline (ledger/exports/) and carries the same files. Streams: memory does not grow with the period.
The same writers build the exports requested on the Audit page and the API.

    manage.py export_audit --since 2026-10-01 --until 2026-11-01 --format bundle --output oct.zip
    manage.py export_audit --since 2026-10-01 --until 2026-11-01 --format csv --output oct/
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.utils.dateparse import parse_date, parse_datetime

from ledger.exports.bundle import write_bundle
from lib.storable import offset_problem
from releases.audit.records import RECORD_TYPES, AuditFilters
from releases.audit.services.exports import (
    COST_FILE,
    bundle_record_files,
    bundle_revision_ids,
    cost_lines,
    record_chunks,
)


def _moment(name: str, text: str) -> dt.datetime:
    try:
        value = parse_datetime(text)
        if value is None and (day := parse_date(text)) is not None:
            value = dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC)
    except ValueError as error:
        raise CommandError(f"--{name} {text!r}: {error}") from None
    if value is None:
        raise CommandError(f"--{name} {text!r}: expected a date (2026-10-01) or ISO 8601 time")
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    if problem := offset_problem(value):
        raise CommandError(f"--{name} {text!r}: {problem}")
    return value


def _records(count: int) -> str:
    return f"{count} record" if count == 1 else f"{count} records"


class Command(BaseCommand):
    help = "Export the records of a period as CSV, JSON Lines or a signed evidence bundle."

    def add_arguments(self, parser):
        parser.add_argument(
            "--since", required=True, help="Start, inclusive (UTC unless an offset is given)."
        )
        parser.add_argument("--until", required=True, help="End, exclusive.")
        parser.add_argument(
            "--service", help="Only this service's records (the chain segment stays whole)."
        )
        parser.add_argument("--format", required=True, choices=["csv", "jsonl", "bundle"])
        parser.add_argument(
            "--output",
            required=True,
            type=Path,
            help="A directory for csv and jsonl (one file per record type), a .zip path for a bundle.",
        )

    def handle(self, *args, **options):
        since = _moment("since", options["since"])
        until = _moment("until", options["until"])
        if until <= since:
            raise CommandError(
                f"--until ({until.isoformat()}) must be after --since ({since.isoformat()})"
            )
        output = Path(options["output"])
        service = options["service"]
        filters = AuditFilters(since=since, until=until, service=service or "")
        counts = {key: record.queryset(filters).count() for key, record in RECORD_TYPES.items()}
        if not any(counts.values()):
            # Said before the files: an empty export is most often a mistyped period.
            scope = f" of service {service}" if service else ""
            self.stdout.write(
                self.style.WARNING(
                    f"0 records in this period{scope} ({since.isoformat()} to "
                    f"{until.isoformat()}): the files hold headers only."
                )
            )
        if options["format"] == "bundle":
            if output.is_dir():
                raise CommandError(f"--output {output} is a directory; a bundle is one .zip file")
            partial = output.with_name(output.name + ".partial")
            with partial.open("wb") as out:
                manifest = write_bundle(
                    out,
                    since=since,
                    until=until,
                    service=service,
                    records=bundle_record_files(filters),
                    revision_ids=bundle_revision_ids(filters),
                )
            partial.replace(output)  # nothing half written under the real name
            self.stdout.write(
                self.style.SUCCESS(
                    f"{output}: {_records(sum(counts.values()))} in "
                    f"{len(manifest['files'])} files, chain head "
                    f"#{manifest['chain_head']['sequence']}"
                )
            )
            return
        output.mkdir(parents=True, exist_ok=True)
        for record in RECORD_TYPES.values():
            target = output / f"{record.key}.{options['format']}"
            partial = target.with_name(target.name + ".partial")
            with partial.open("wb") as out:
                for chunk in record_chunks(record, filters, options["format"]):
                    out.write(chunk)
            partial.replace(target)  # nothing half written under the real name
            self.stdout.write(
                self.style.SUCCESS(f"{target}: {_records(counts[record.key])} written")
            )
        target = output / COST_FILE
        partial = target.with_name(target.name + ".partial")
        with partial.open("w", encoding="utf-8", newline="") as text:
            text.writelines(cost_lines(filters))
        partial.replace(target)
        self.stdout.write(self.style.SUCCESS(f"{target}: the period's cost as FOCUS 1.0 CSV"))
