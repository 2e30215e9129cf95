"""Record a service's day from two saved scrapes of its engine's Prometheus endpoint.

For backfills (scrapes saved by hand, or by another collector) and for
checking what the scrape task would record: the same verb it calls
(`services.record_scraped_day`, run as the system). BEFORE is the scrape at
the start of the day's window, AFTER the one at its end; counters and
histogram buckets are differenced between them. Prints the recorded day as
JSON. Malformed exposition text exits non-zero naming the file and line.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.core.serializers.json import DjangoJSONEncoder

from ledger import services
from ledger.metrics_import import ENGINES, ExpositionError, parse_exposition, summarize
from ledger.models import RunSummary, Service
from ledger.queries.run_evidence import run_summary_json
from ledger.services.run_evidence import clean_run_summary


def _messages(exc: ValidationError) -> str:
    if hasattr(exc, "error_dict"):
        return "; ".join(
            f"{field}: {message}"
            for field, errors in exc.message_dict.items()
            for message in errors
        )
    return "; ".join(exc.messages)


def _day(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise CommandError(f"--date {text!r} is not a day in the form YYYY-MM-DD.") from None


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CommandError(f"{path}: cannot be read: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise CommandError(f"{path}, line {line}: not UTF-8 text ({exc.reason}).") from exc


class Command(BaseCommand):
    help = (
        "Compute a service's day from two scrapes (BEFORE.txt and AFTER.txt, Prometheus "
        "exposition text) of its engine's /metrics, record it as the day's run summary "
        "from source 'scrape', and print it as JSON."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "before", metavar="BEFORE.txt", help="The scrape at the window's start."
        )
        parser.add_argument("after", metavar="AFTER.txt", help="The scrape at the window's end.")
        parser.add_argument("--service", required=True, metavar="SLUG", help="Service slug.")
        parser.add_argument(
            "--date", required=True, metavar="YYYY-MM-DD", help="The day (UTC) the window covers."
        )
        parser.add_argument(
            "--engine", required=True, choices=list(ENGINES), help="Whose metric names to read."
        )
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="Compute and print the day without recording it.",
        )

    def handle(self, *args, **options):
        service = Service.objects.filter(slug=options["service"]).first()
        if service is None:
            raise CommandError(f"There is no service {options['service']!r}.")
        day = _day(options["date"])
        engine = ENGINES[options["engine"]]
        paths = Path(options["before"]), Path(options["after"])
        try:
            before, after = (parse_exposition(_read(p), source=str(p)) for p in paths)
        except ExpositionError as exc:
            raise CommandError(str(exc)) from exc
        window = {"before": paths[0].name, "after": paths[1].name}
        try:
            if options["dry_run"]:
                fields = summarize(engine, before, after).fields
                fields["details"] = {**fields["details"], "window": window}
                cleaned = clean_run_summary(
                    fields, date=day, source=RunSummary.Source.SCRAPE, require_requests=False
                )
                self._print({"dry_run": True, "service": service.slug, "date": day, **cleaned})
                return
            summary, outcome = services.record_scraped_day(
                service,
                actor=None,
                date=day,
                engine=engine,
                before=before,
                after=after,
                window=window,
            )
        except ValidationError as exc:
            raise CommandError(_messages(exc)) from exc
        self._print({"outcome": outcome, **run_summary_json(summary)})

    def _print(self, data: dict) -> None:
        self.stdout.write(json.dumps(data, indent=2, cls=DjangoJSONEncoder))
