"""Recompute the stored cost of some days (releases/cost/services.py).

    manage.py recompute_cost --since 2026-11-01 --until 2026-12-01 [--service kb-assistant]

`--until` is exclusive, as `export_cost`'s is. For a changed COST_ALLOCATION_KEY, a load
test or routed replica that should count for days already priced, or a backfill of the
days recorded before the cost was stored (run it once over all the run evidence after
the migration that adds `CostShare`). One transaction: the days' rows are replaced at
once or not at all.
"""

from __future__ import annotations

import datetime as dt

from django.core.management.base import BaseCommand, CommandError

from ledger.models import Service
from releases.cost.services import record_cost
from releases.management.commands.export_cost import _day


class Command(BaseCommand):
    help = "Recompute the stored GPU cost of the service-days of a period."

    def add_arguments(self, parser):
        parser.add_argument("--since", required=True, help="First day, included (YYYY-MM-DD).")
        parser.add_argument("--until", required=True, help="Day after the last, excluded.")
        parser.add_argument("--service", action="append", help="Only this service (repeatable).")

    def handle(self, *args, **options):
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
        counts = record_cost(since, until - dt.timedelta(days=1), services or None)
        self.stdout.write(
            f"recomputed {counts.service_days} service-days from {since} to "
            f"{until - dt.timedelta(days=1)}: {counts.rows} rows, "
            f"{counts.unpriced} service-days without a price sheet"
        )
