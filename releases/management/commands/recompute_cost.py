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

from django.core.management.base import BaseCommand

from releases.cost.services import record_cost
from releases.management.commands.export_cost import period_and_services


class Command(BaseCommand):
    help = "Recompute the stored GPU cost of the service-days of a period."

    def add_arguments(self, parser):
        parser.add_argument("--since", required=True, help="First day, included (YYYY-MM-DD).")
        parser.add_argument("--until", required=True, help="Day after the last, excluded.")
        parser.add_argument("--service", action="append", help="Only this service (repeatable).")

    def handle(self, *args, **options):
        since, until, services = period_and_services(options)
        counts = record_cost(since, until - dt.timedelta(days=1), services)
        self.stdout.write(
            f"recomputed {counts.service_days} service-days from {since} to "
            f"{until - dt.timedelta(days=1)}: {counts.rows} rows, "
            f"{counts.unpriced} service-days without a price sheet"
        )
