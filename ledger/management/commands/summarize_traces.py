"""Record services' days of run evidence from the model calls their traces carried
(ledger/traces/days.py). Beat does yesterday's every day; run it by hand for a day
the traces arrived late for, or to backfill."""

from __future__ import annotations

import datetime as dt

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from ledger.models import Service
from ledger.traces.days import record_day_from_traces, services_with_spans


def _date(value: str) -> dt.date:
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise CommandError(f"--date {value!r}: expected YYYY-MM-DD") from None


class Command(BaseCommand):
    help = "Record a day of run evidence (per tenant, task type and backend) from the traces."

    def add_arguments(self, parser):
        parser.add_argument("--date", help="The UTC day (YYYY-MM-DD); default: yesterday.")
        parser.add_argument(
            "--service", action="append", default=[], help="A service's slug (repeatable)."
        )

    def handle(self, *args, **options):
        date = (
            _date(options["date"])
            if options["date"]
            else timezone.now().astimezone(dt.UTC).date() - dt.timedelta(days=1)
        )
        services = services_with_spans(date)
        if options["service"]:
            known = set(
                Service.objects.filter(slug__in=options["service"]).values_list("slug", flat=True)
            )
            if unknown := set(options["service"]) - known:
                raise CommandError(f"--service: no service {', '.join(sorted(unknown))}")
            services = services.filter(slug__in=options["service"])
        refused = 0
        for service in services:
            try:
                recorded = record_day_from_traces(service, date, actor=None)
            except ValidationError as error:
                refused += 1
                self.stderr.write(f"{service.slug} {date}: refused: {error.message_dict}")
                continue
            if recorded is not None:
                summary, outcome = recorded
                self.stdout.write(
                    f"{service.slug} {date}: {outcome}, {summary.requests} requests in "
                    f"{summary.breakdown.count()} rows"
                )
        if refused:
            raise CommandError(f"{refused} service days refused")
