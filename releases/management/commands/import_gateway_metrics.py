"""Record a service's day, by tenant, task type and backend, from two saved scrapes of
the gateway's Prometheus endpoint.

The gateway counterpart of `import_metrics` (which reads an engine's): for backfills,
for scrapes another collector saved, and for checking what a day would record before
recording it. BEFORE is the scrape of LiteLLM's `/metrics/` at the start of the day's
window, AFTER the one at its end; counters and histogram buckets are differenced
between them (`releases.gateway.metrics`). The day is recorded through the same verb as
the gateway's push (`record_run_summary`, source "gateway", run as the system), so its
breakdown rows meet the same checks. Prints the recorded day as JSON. Malformed
exposition text exits non-zero naming the file and line.
"""

from __future__ import annotations

import json
from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.core.serializers.json import DjangoJSONEncoder

from ledger.management.commands.import_metrics import _day, _messages, _read
from ledger.metrics_import import ExpositionError, parse_exposition
from ledger.models import RunSummary, Service
from ledger.queries.run_evidence import run_summary_json
from ledger.services.run_evidence import clean_breakdown, clean_run_summary
from releases.gateway.services.gateway_day import read_day, record_gateway_day


class Command(BaseCommand):
    help = (
        "Compute a service's day by tenant, task type and backend from two scrapes "
        "(BEFORE.txt and AFTER.txt, Prometheus exposition text) of the LiteLLM gateway's "
        "/metrics, record it as the day's run summary from source 'gateway' with its "
        "breakdown rows, and print it as JSON."
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
            "--dry-run",
            action="store_true",
            help="Compute and print the day and its rows without recording them.",
        )

    def handle(self, *args, **options):
        service = Service.objects.filter(slug=options["service"]).first()
        if service is None:
            raise CommandError(f"There is no service {options['service']!r}.")
        day = _day(options["date"])
        paths = Path(options["before"]), Path(options["after"])
        try:
            before, after = (parse_exposition(_read(p), source=str(p)) for p in paths)
        except ExpositionError as exc:
            raise CommandError(str(exc)) from exc
        window = {"before": paths[0].name, "after": paths[1].name}
        try:
            if options["dry_run"]:
                fields = dict(read_day(service, before=before, after=after, window=window).fields)
                errors: dict[str, str] = {}
                rows = clean_breakdown(fields.pop("breakdown"), service=service, errors=errors)
                if errors or rows is None:
                    raise ValidationError(errors)
                cleaned = clean_run_summary(
                    fields, date=day, source=RunSummary.Source.GATEWAY, require_requests=True
                )
                self._print(
                    {
                        "dry_run": True,
                        "service": service.slug,
                        "date": day,
                        **cleaned,
                        "breakdown": rows.rows,
                    }
                )
                return
            summary, outcome = record_gateway_day(
                service, actor=None, date=day, before=before, after=after, window=window
            )
        except ValidationError as exc:
            raise CommandError(_messages(exc)) from exc
        self._print(
            {
                "outcome": outcome,
                **run_summary_json(summary),
                "breakdown_rows": summary.breakdown.count(),
            }
        )

    def _print(self, data: dict) -> None:
        self.stdout.write(json.dumps(data, indent=2, cls=DjangoJSONEncoder))
