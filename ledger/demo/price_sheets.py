"""The demo's price sheets: a list price in USD for every GPU model its runtimes name,
in force from 90 days before the day it is seeded, so that the demo's internal and
production releases pass the cost_record gate."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from django.db import transaction
from django.utils import timezone

from ledger.models import PriceSheet
from ledger.services import record_price_sheet

# On-demand cloud prices per GPU-hour, rounded (late 2026).
DEMO_PRICES: dict[str, Decimal] = {
    "A100-80GB": Decimal("1.7900"),
    "H100-80GB": Decimal("2.4900"),
    "L4-24GB": Decimal("0.5900"),
    "L40S-48GB": Decimal("0.9900"),
    "RTX-4090-24GB": Decimal("0.3900"),
}
DAYS_BEFORE = 90


@transaction.atomic
def seed_price_sheets() -> int:
    """Record the first price of each demo GPU model that has none; how many were."""
    priced = set(PriceSheet.objects.values_list("gpu_model", flat=True))
    start = timezone.now().date() - dt.timedelta(days=DAYS_BEFORE)
    recorded = 0
    for gpu_model, price in sorted(DEMO_PRICES.items()):
        if gpu_model in priced:
            continue
        record_price_sheet(
            actor=None,
            gpu_model=gpu_model,
            price_per_gpu_hour=price,
            currency="USD",
            effective_from=start,
            note="Demo: on-demand cloud list price.",
        )
        recorded += 1
    return recorded
