"""The cost room's Celery task. Its name is a public API (verb_noun).

- `record_price_sheet_cost`: store the cost of the service-days a price sheet re-prices,
  when there are too many to do in the price sheet's own transaction
  (`services.PRICE_SHEET_INLINE_DAYS`). Idempotent: the days' rows are replaced by what
  the cost is now, so ``acks_late`` is safe and a second run changes nothing.
"""

from __future__ import annotations

import datetime as dt
import logging

from celery import shared_task

from releases.cost import services

logger = logging.getLogger(__name__)


@shared_task(name="record_price_sheet_cost", acks_late=True, time_limit=3600)
def record_price_sheet_cost(gpu_model: str, since: str) -> int:
    """`since`: the price sheet's first day, YYYY-MM-DD. Answers the rows written."""
    counts = services.record_price_sheet_cost(gpu_model, dt.date.fromisoformat(since))
    logger.info(
        "record_price_sheet_cost: %s from %s, %d service-days, %d rows",
        gpu_model,
        since,
        counts.service_days,
        counts.rows,
    )
    return counts.rows
