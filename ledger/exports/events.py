"""The ledger's events of a period, as rows for an export and as a chain segment."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import psycopg
from django.db import transaction
from django.db.models import Max, Min, QuerySet

from ledger.chain import GENESIS_HASH, _json_default
from ledger.exports.tabular import FORMULA_STARTS
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


# The code points of FORMULA_STARTS: ascii() reads a cell's first one, several times
# cheaper than matching a pattern on a million rows. PostgreSQL (14 and later) looks an
# IN list of nine constants or more up in a hash table, so one probe passes any cell,
# whatever its first character (digits too): faster than the range check this had
# before a list of six, and than two range checks around the ASCII and full-width codes.
_FORMULA_CODES = sorted(ord(start) for start in FORMULA_STARTS)


def _neutralised(column: str) -> str:
    """SQL for a text cell made spreadsheet-safe, as `tabular.spreadsheet_safe` does it."""
    codes = ", ".join(map(str, _FORMULA_CODES))
    return f"CASE WHEN ascii({column}) IN ({codes}) THEN '''' || {column} ELSE {column} END"


# Constant SQL (no input reaches it; the period and service are bound parameters).
_COPY_SELECT = (
    "SELECT e.sequence, "  # noqa: S608
    # tabular.utc_moment's form: PostgreSQL's own text of a timestamp (DateStyle ISO)
    # with a "T": to_char costs half a second more over a million rows.
    "replace((e.created_at AT TIME ZONE 'UTC')::text, ' ', 'T') || '+00:00', "
    f"{_neutralised('e.actor_label')}, {_neutralised('e.action')}, "
    f"{_neutralised('e.subject_type')}, {_neutralised('e.subject_id')}, "
    f"{_neutralised('e.subject_label')}, {_neutralised('s.slug')}, e.payload, "
    "e.prev_hash, e.hash "
    "FROM ledger_event e LEFT JOIN ledger_service s ON s.id = e.service_id "
    "WHERE e.created_at >= %s AND e.created_at < %s"
)


def copy_csv(
    since: dt.datetime, until: dt.datetime, *, service: str | None = None
) -> Iterator[bytes]:
    """The same CSV as `tabular.csv_lines(EVENT_COLUMNS, event_rows(...))`, written by
    PostgreSQL's COPY, so a million events stream in about the time COPY itself takes.
    PostgreSQL only; elsewhere use the Python path."""
    from django.db import connection

    query = _COPY_SELECT + (" AND s.slug = %s" if service else "") + " ORDER BY e.sequence"
    params: list[Any] = [since, until, *([service] if service else [])]
    yield (",".join(EVENT_COLUMNS) + "\n").encode()
    connection.ensure_connection()
    # psycopg's own cursor (Django's wrapper has no copy()), binding on the client:
    # PostgreSQL takes no parameters in a COPY, and the connection binds on the server.
    # The transaction only scopes the DateStyle the moments are written in; it stays
    # open while the caller holds the generator: read it to the end, or close it.
    with (
        transaction.atomic(),
        psycopg.ClientCursor(connection.connection) as raw,
    ):
        raw.execute("SET LOCAL datestyle TO 'ISO'")
        with raw.copy(f"COPY ({query}) TO STDOUT WITH (FORMAT csv)", params) as copy:
            # COPY hands over a row at a time; write in blocks of about 1 MiB.
            buffer = bytearray()
            for row in copy:
                buffer += row
                if len(buffer) >= 1 << 20:
                    yield bytes(buffer)
                    buffer.clear()
            yield bytes(buffer)


def event_rows(events: QuerySet[Event]) -> Iterator[tuple[Any, ...]]:
    """Rows in EVENT_COLUMNS order from a server-side cursor."""
    return events.values_list(*_FIELDS).iterator(chunk_size=CHUNK)


def segment_records(since: dt.datetime, until: dt.datetime) -> Iterator[dict[str, Any]]:
    """Every event of the period — unfiltered, so the segment is contiguous — preceded by
    the event just before it (or a genesis marker), each with exactly the fields its
    hash covers, in the form the hash was computed over, and its signature."""
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
        yield _segment_record(tuple(getattr(before, f) for f in _SEGMENT_FIELDS))
    # By sequence, not by time: an event whose clock lagged is still inside the segment.
    segment = Event.objects.filter(sequence__gte=first, sequence__lte=last).order_by("sequence")
    for row in segment.values_list(*_SEGMENT_FIELDS).iterator(chunk_size=CHUNK):
        yield _segment_record(row)


_SEGMENT_FIELDS = (
    "sequence",
    "service_id",
    "created_at",
    "actor_label",
    "action",
    "subject_type",
    "subject_id",
    "payload",
    "prev_hash",
    "hash",
    "key_id",
    "signature",
)


def _segment_record(row: tuple[Any, ...]) -> dict[str, Any]:
    (
        sequence,
        service,
        created,
        actor,
        action,
        subject_type,
        subject_id,
        payload,
        prev,
        own,
        key_id,
        signature,
    ) = row
    return {
        "sequence": sequence,
        "service": service,
        "created_at": _json_default(created),
        "actor": actor,
        "action": action,
        "subject_type": subject_type,
        "subject_id": subject_id,
        "payload": payload,
        "prev_hash": prev,
        "hash": own,
        "key_id": key_id,
        "signature": signature,
    }


def mentioned_ids(events: QuerySet[Event], subject_type: str) -> list[int]:
    """The ids of subjects of one type that the events mention (one query)."""
    ids = events.filter(subject_type=subject_type).values_list("subject_id", flat=True)
    return sorted({int(i) for i in ids.distinct().order_by() if i.isdigit()})
