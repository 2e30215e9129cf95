"""The ledger's events of a period, as rows for an export and as a chain segment."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

from django.db.models import Max, Min, QuerySet

from ledger.chain import GENESIS_HASH, _json_default
from ledger.models import Event

EVENT_COLUMNS = (
    "sequence",
    "created_at",
    "actor",
    "action",
    "subject_type",
    "subject_id",
    "subject_label",
    "service",
    "payload",
    "prev_hash",
    "hash",
)
_FIELDS = (
    "sequence",
    "created_at",
    "actor_label",
    "action",
    "subject_type",
    "subject_id",
    "subject_label",
    "service__slug",
    "payload",
    "prev_hash",
    "hash",
)
CHUNK = 5000


def period_events(
    since: dt.datetime, until: dt.datetime, *, service: str | None = None
) -> QuerySet[Event]:
    events = Event.objects.filter(created_at__gte=since, created_at__lt=until)
    if service:
        events = events.filter(service__slug=service)
    return events.order_by("sequence")


def event_rows(events: QuerySet[Event]) -> Iterator[tuple[Any, ...]]:
    """Rows in EVENT_COLUMNS order from a server-side cursor."""
    return events.values_list(*_FIELDS).iterator(chunk_size=CHUNK)


def segment_records(since: dt.datetime, until: dt.datetime) -> Iterator[dict[str, Any]]:
    """Every event of the period — unfiltered, so the segment is contiguous — preceded by
    the event just before it (or a genesis marker), each with exactly the fields its
    hash covers, in the form the hash was computed over."""
    bounds = Event.objects.filter(created_at__gte=since, created_at__lt=until).aggregate(
        first=Min("sequence"), last=Max("sequence")
    )
    first, last = bounds["first"], bounds["last"]
    if first is None:
        return
    before = Event.objects.filter(sequence=first - 1).first() if first > 1 else None
    if before is None:
        yield {"sequence": 0, "hash": GENESIS_HASH, "genesis": True}
    else:
        yield _segment_record(before)
    # By sequence, not by time: an event whose clock lagged is still inside the segment.
    segment = Event.objects.filter(sequence__gte=first, sequence__lte=last).order_by("sequence")
    for event in segment.iterator(chunk_size=CHUNK):
        yield _segment_record(event)


def _segment_record(event: Event) -> dict[str, Any]:
    return {
        "sequence": event.sequence,
        "service": event.service_id,
        "created_at": _json_default(event.created_at),
        "actor": event.actor_label,
        "action": event.action,
        "subject_type": event.subject_type,
        "subject_id": event.subject_id,
        "payload": event.payload,
        "prev_hash": event.prev_hash,
        "hash": event.hash,
    }
