"""Write the cost of a period as a FinOps FOCUS 1.0 CSV (releases/cost/focus.py).

    manage.py export_cost --since 2026-11-01 --until 2026-12-01 --output november.csv

`--until` is exclusive, as FOCUS's period ends and `export_audit`'s are: the line above
covers November. Streams the stored cost: PostgreSQL writes the CSV (a COPY,
`releases/cost/focus_copy.py`), SQLite's path the Python writer; memory does not grow
with the period. The file is written
beside its name and renamed into place once complete, so a reader never sees half a file.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.utils.dateparse import parse_date

from ledger.models import Service
from releases.cost.focus import FocusStats
from releases.cost.focus_copy import focus_bytes


def _day(name: str, text: str) -> dt.date:
    try:
        day = parse_date(text)
    except ValueError as error:
        raise CommandError(f"--{name} {text!r}: {error}") from None
    if day is None:
        raise CommandError(f"--{name} {text!r}: expected a day, YYYY-MM-DD")
    return day


def period_and_services(options: dict) -> tuple[dt.date, dt.date, list[str] | None]:
    """`--since`, `--until` (excluded, after `--since`) and the `--service`s named, each
    checked; CommandError names the option that is wrong."""
    since, until = _day("since", options["since"]), _day("until", options["until"])
    if until <= since:
        raise CommandError(
            f"--until {until} is not after --since {since}: the period would be empty "
            "(--until is excluded)."
        )
    services = options["service"]
    if services:
        known = set(Service.objects.filter(slug__in=services).values_list("slug", flat=True))
        if missing := sorted(set(services) - known):
            raise CommandError(f"--service: no service is named {', '.join(missing)}.")
    return since, until, services or None


class Command(BaseCommand):
    help = "Write the GPU cost of a period per service, day, tenant and task type as FOCUS 1.0 CSV."

    def add_arguments(self, parser):
        parser.add_argument("--since", required=True, help="First day, included (YYYY-MM-DD).")
        parser.add_argument("--until", required=True, help="Day after the last, excluded.")
        parser.add_argument("--service", action="append", help="Only this service (repeatable).")
        parser.add_argument("--output", required=True, help="The CSV file to write.")

    def handle(self, *args, **options):
        since, until, services = period_and_services(options)
        path = Path(options["output"])
        if path.is_dir():
            raise CommandError(f"--output {path} is a folder; name the CSV file to write.")
        partial = path.with_name(f".{path.name}.partial")
        stats = FocusStats()
        try:
            with partial.open("wb") as out:
                for chunk in focus_bytes(since, until - dt.timedelta(days=1), services, stats):
                    out.write(chunk)
            os.replace(partial, path)
        except OSError as error:
            partial.unlink(missing_ok=True)
            raise CommandError(f"--output {path}: {error.strerror or error}") from None
        self.stdout.write(
            f"wrote {path}: {stats.rows} rows for {stats.service_days - stats.unpriced} "
            f"service-days from {since} to {until - dt.timedelta(days=1)}"
        )
        if stats.unpriced:
            self.stderr.write(
                f"{stats.unpriced} service-days left out: no price sheet was in force for "
                "their GPU model (record one at /price-sheets/)."
            )
