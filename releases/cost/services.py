"""The cost of service-days written down when their facts are recorded.

A service-day's cost (`releases.models.CostShare`) is computed by `cost_days`, the one
computation of the cost, and stored:

- when a run summary is recorded or replaced: that service-day, in the same transaction
  (`record_cost_of_events` listens to `ledger.chain.events_appended`), so a day's cost
  exists exactly when the day does;
- when a price sheet is recorded: every service-day from its `effective_from` of the
  services whose run evidence names a revision on that GPU model, in the same
  transaction when they are at most PRICE_SHEET_INLINE_DAYS, else by the task
  `record_price_sheet_cost` once the price sheet commits (docs/cost.md says why);
- by `manage.py recompute_cost` (a changed COST_ALLOCATION_KEY, a backfill).

What else goes into a day's cost (the revision's routed replicas, its newest load
test's throughput, the release that made it live) is frozen at that moment: a later
change to them shows after the command recomputes the days.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

from django.db import connection, transaction
from django.db.models import Max, QuerySet

from ledger.models import Event, RunSummary
from lib.tasks import send_on_commit
from releases.cost.attribution import IDLE
from releases.cost.focus import QUANTITY, charge_description, focus_tags
from releases.cost.queries import CostDay, allocation_key, cost_days
from releases.models import CostShare

_BATCH = 5_000
# A price sheet re-pricing at most this many service-days stores their cost in its own
# transaction (the demo's: a few hundred, well under a second); more are queued.
PRICE_SHEET_INLINE_DAYS = 5_000
RUN_SUMMARY_ACTIONS = frozenset({"run_summary.recorded", "run_summary.replaced"})


@dataclass
class Recomputed:
    service_days: int = 0
    unpriced: int = 0
    rows: int = 0


def _hours(value: Fraction) -> Decimal:
    """GPU-hours to the microhour, as the export writes them (`focus._quantity`)."""
    return (Decimal(value.numerator) / Decimal(value.denominator)).quantize(QUANTITY)


def _rows(day: CostDay, service_id: int, summary_id: int, key: str) -> Iterator[CostShare]:
    served = day.served_by
    common: dict[str, Any] = {
        "summary_id": summary_id,
        "service_id": service_id,
        "date": day.date,
        "priced": day.priced,
        "revision_id": served.revision_id,
        "revision_label": served.label,
        "fingerprint": served.fingerprint,
        "release": served.release,
        "gpu_model": served.gpu_model,
        "gpus_per_replica": served.gpus_per_replica,
        "replicas": served.replicas,
        "output_tokens_per_s": served.output_tokens_per_s,
        "price_per_gpu_hour": day.price_per_gpu_hour,
        "currency": day.currency,
        "price_since": day.price_since,
    }
    if day.split is None:
        yield CostShare(position=0, **common)
        return
    split = day.split
    common.update(
        allocation_key=str(split.key),
        capacity_known=split.capacity_known,
        used_share=float(split.used_share),
        day_gpu_hours=int(split.gpu_hours),
    )
    for position, part in enumerate(split.parts):
        usage = day.usage.get((part.tenant, part.task_type)) if part.tenant != IDLE else None
        yield CostShare(
            position=position,
            tenant=part.tenant,
            task_type=part.task_type,
            gpu_hours=_hours(part.gpu_hours),
            cost=part.cost,
            requests=usage.requests if usage else 0,
            input_tokens=usage.input_tokens if usage else 0,
            output_tokens=usage.output_tokens if usage else 0,
            accepted_answers=usage.accepted_answers if usage else 0,
            description=charge_description(day, part.tenant, part.task_type),
            tags=focus_tags(part.tenant, part.task_type, served.gpu_model, key),
            **common,
        )


def record_cost(
    since: dt.date,
    until: dt.date,
    services: Iterable[str] | None = None,
    *,
    service_ids: Iterable[int] | None = None,
) -> Recomputed:
    """(Re)write the stored cost of these days (both included) and services (by slug or
    by id; all when neither is given): the rows there are replaced by what `cost_days`
    computes now."""
    slugs = list(services) if services is not None else None
    ids = list(service_ids) if service_ids is not None else None
    counts = Recomputed()
    key = str(allocation_key())
    with transaction.atomic():
        stale = CostShare.objects.filter(date__gte=since, date__lte=until)
        if slugs is not None:
            stale = stale.filter(service__slug__in=slugs)
        if ids is not None:
            stale = stale.filter(service_id__in=ids)
        stale._raw_delete(stale.db)  # no signals, no cascade: nothing points at a row
        batch: list[CostShare] = []
        for day in cost_days(since, until, slugs, service_ids=ids):
            counts.service_days += 1
            counts.unpriced += 0 if day.priced else 1
            assert day.service_id is not None and day.summary_id is not None
            for row in _rows(day, day.service_id, day.summary_id, key):
                batch.append(row)
                if len(batch) >= _BATCH:
                    counts.rows += _write(batch)
                    batch = []
        counts.rows += _write(batch)
    return counts


_COLUMNS = [field.column for field in CostShare._meta.concrete_fields if field.column != "id"]


def _write(rows: list[CostShare]) -> int:
    """Insert the rows: one COPY on PostgreSQL (a fleet's price sheet re-prices a
    million of them; bulk_create's per-value preparation is several times slower),
    bulk_create elsewhere. Django's query log does not see a COPY."""
    if not rows:
        return 0
    if connection.vendor != "postgresql":
        CostShare.objects.bulk_create(rows, batch_size=500)
        return len(rows)
    quote = connection.ops.quote_name
    statement = (
        f"COPY {quote(CostShare._meta.db_table)} "
        f"({', '.join(quote(column) for column in _COLUMNS)}) FROM STDIN"
    )
    with connection.cursor() as cursor, cursor.cursor.copy(statement) as copy:
        for row in rows:
            copy.write_row([getattr(row, column) for column in _COLUMNS])
    return len(rows)


def _price_sheet_days(gpu_model: str, since: dt.date) -> QuerySet[RunSummary]:
    """The run summaries from `since` that name a revision on `gpu_model`."""
    return RunSummary.objects.filter(date__gte=since, revision__runtime__gpu_model=gpu_model)


def record_price_sheet_cost(gpu_model: str, since: dt.date) -> Recomputed:
    """Store the cost of the days a price sheet of `gpu_model` from `since` prices: every
    day from `since` of the services whose run evidence names a revision on that GPU
    model (their other days are recomputed too, unchanged)."""
    days = _price_sheet_days(gpu_model, since)
    last = days.aggregate(last=Max("date"))["last"]
    if last is None:
        return Recomputed()
    ids = sorted(set(days.values_list("service_id", flat=True)))
    return record_cost(since, last, service_ids=ids)


def _day(value: str) -> dt.date:
    return dt.date.fromisoformat(value)


# Service-days waiting while a bulk writer defers their cost (`deferred_cost`).
_deferred: ContextVar[dict[int, list[dt.date]] | None] = ContextVar("deferred_cost", default=None)


@contextlib.contextmanager
def deferred_cost() -> Iterator[None]:
    """Store the cost of the run summaries recorded inside the block once, at its end, in
    one `record_cost` per service (a fixed number of queries for its whole range) rather
    than one per day: the demo records 60 days of seven services at once. Price sheets
    inside the block are priced as always. Not nested."""
    pending: dict[int, list[dt.date]] = {}
    token = _deferred.set(pending)
    try:
        yield
    finally:
        _deferred.reset(token)
    for service_id, dates in sorted(pending.items()):
        record_cost(min(dates), max(dates), service_ids=[service_id])


def record_cost_of_events(sender: Any, events: list[Event], **kwargs: Any) -> None:
    """`events_appended` receiver: store the cost of the service-days these Events
    recorded or re-priced, in the appending transaction (or at the end of a
    `deferred_cost` block)."""
    days: dict[int, list[dt.date]] = {}
    sheets: list[tuple[str, dt.date]] = []
    for event in events:
        if event.action not in RUN_SUMMARY_ACTIONS and event.action != "price_sheet.recorded":
            continue
        payload = json.loads(event.payload)  # the canonical JSON the Event holds
        if event.action in RUN_SUMMARY_ACTIONS and event.service_id is not None:
            days.setdefault(event.service_id, []).append(_day(payload["date"]))
        elif event.action == "price_sheet.recorded":
            sheets.append((payload["gpu_model"], _day(payload["effective_from"])))
    pending = _deferred.get()
    for service_id, dates in days.items():
        if pending is not None:
            pending.setdefault(service_id, []).extend(dates)
        else:
            record_cost(min(dates), max(dates), service_ids=[service_id])
    for gpu_model, since in sheets:
        if _price_sheet_days(gpu_model, since).count() <= PRICE_SHEET_INLINE_DAYS:
            record_price_sheet_cost(gpu_model, since)
        else:
            # A fleet's worth: on commit, by the worker (bench/README.md has the figure).
            send_on_commit("record_price_sheet_cost", gpu_model, since.isoformat())
