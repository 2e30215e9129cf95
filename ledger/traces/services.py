"""Recording model-call spans, and sweeping those past retention.

`record_spans` stores what `ledger.traces.otlp.extract` kept, in one transaction: the
day partitions it needs first, then the rows (a span sent twice is stored once: the
exporters retry). A span older than the retention or more than a day ahead of the
ledger's clock is rejected with its reason. No Event per span: spans are facts of
traffic, not changes of the ledger; the sweep that deletes them is an Event.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from ledger.chain import append_event
from ledger.models import ModelCallSpan
from ledger.traces import partitions
from ledger.traces.otlp import Extracted, SpanFacts
from lib import metrics
from lib.actors import Actor

BATCH = 512
SQLITE_DELETE_BATCH = 5_000
FUTURE_SKEW = dt.timedelta(days=1)


@dataclass
class Recorded:
    stored: int = 0
    rejected: list[tuple[str, str]] = field(default_factory=list)


def retention_start(now: dt.datetime) -> dt.date:
    """The first UTC day still kept."""
    return now.astimezone(dt.UTC).date() - dt.timedelta(days=settings.RETENTION_TRACES_DAYS)


def record_spans(extracted: Extracted, *, now: dt.datetime | None = None) -> Recorded:
    now = now or timezone.now()
    first_day = retention_start(now)
    recorded = Recorded(rejected=list(extracted.rejected))
    kept: list[SpanFacts] = []
    for facts in extracted.spans:
        if facts.started_at.date() < first_day:
            recorded.rejected.append(
                (
                    f"span {facts.trace_id}/{facts.span_id}",
                    f"started {facts.started_at:%Y-%m-%d}, before the retention of "
                    f"{settings.RETENTION_TRACES_DAYS} days (RETENTION_TRACES_DAYS)",
                )
            )
        elif facts.started_at > now + FUTURE_SKEW:
            recorded.rejected.append(
                (
                    f"span {facts.trace_id}/{facts.span_id}",
                    f"started {facts.started_at:%Y-%m-%d %H:%M} UTC, more than a day ahead",
                )
            )
        else:
            kept.append(facts)
    with transaction.atomic():
        partitions.ensure(facts.started_at.date() for facts in kept)
        if kept and connection.vendor == "postgresql":
            _copy(kept)
        else:
            ModelCallSpan.objects.bulk_create(
                [ModelCallSpan(**vars(facts)) for facts in kept],
                batch_size=BATCH,
                ignore_conflicts=True,
            )
    recorded.stored = len(kept)
    metrics.OTLP_SPANS.labels(outcome="stored").inc(len(kept))
    metrics.OTLP_SPANS.labels(outcome="rejected").inc(len(recorded.rejected))
    metrics.OTLP_SPANS.labels(outcome="not_a_model_call").inc(extracted.skipped)
    metrics.OTLP_CONTENT_DROPPED.inc(extracted.content_dropped)
    return recorded


_COLUMNS = [f.column for f in ModelCallSpan._meta.concrete_fields if f.column]
_JSON_COLUMNS = frozenset({"finish_reasons", "latency_ms"})


def _copy(kept: list[SpanFacts]) -> None:
    """The rows COPied into a session's temporary table, then inserted from it skipping
    the spans already stored (an exporter's retry): several times faster than a
    multi-row INSERT of 512 rows of 25 columns, which Django builds parameter by parameter."""
    from psycopg.types.json import Jsonb

    columns = ", ".join(_COLUMNS)
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE TEMP TABLE IF NOT EXISTS spans_in (LIKE {partitions.TABLE}) "
            "ON COMMIT DELETE ROWS"
        )
        with cursor.cursor.copy(f"COPY spans_in ({columns}) FROM STDIN") as copy:
            for facts in kept:
                values = vars(facts)
                copy.write_row(
                    [
                        Jsonb(values[column]) if column in _JSON_COLUMNS else values[column]
                        for column in _COLUMNS
                    ]
                )
        cursor.execute(
            f"INSERT INTO {partitions.TABLE} ({columns}) SELECT {columns} FROM spans_in "  # noqa: S608 - the model's own columns
            "ON CONFLICT DO NOTHING"
        )
        cursor.execute("TRUNCATE spans_in")


def sweep_traces(*, actor: Actor, now: dt.datetime | None = None) -> dict[str, object]:
    """Delete the spans of the days before the retention: whole partitions on
    PostgreSQL, batches of rows on SQLite; one Event says what went."""
    first_day = retention_start(now or timezone.now())
    with transaction.atomic():
        if partitions.partitioned():
            dropped = partitions.drop_before(first_day)
            result: dict[str, object] = {
                "before": first_day.isoformat(),
                "partitions_dropped": [day.isoformat() for day in dropped],
            }
        else:
            result = {"before": first_day.isoformat(), "rows_deleted": _delete_rows(first_day)}
        append_event(
            actor=actor,
            action="retention.traces_swept",
            subject=("retention", "model-call-spans"),
            subject_label="model-call spans",
            payload={**result, "retention_days": settings.RETENTION_TRACES_DAYS},
        )
    return result


def _delete_rows(first_day: dt.date) -> int:
    cutoff = dt.datetime.combine(first_day, dt.time(), tzinfo=dt.UTC)
    deleted = 0
    table = connection.ops.quote_name(ModelCallSpan._meta.db_table)
    while True:
        with connection.cursor() as cursor:
            cursor.execute(
                f"DELETE FROM {table} WHERE rowid IN (SELECT rowid FROM {table} "  # noqa: S608
                "WHERE started_at < %s LIMIT %s)",
                [connection.ops.adapt_datetimefield_value(cutoff), SQLITE_DELETE_BATCH],
            )
            count = cursor.rowcount
        deleted += count
        if count < SQLITE_DELETE_BATCH:
            return deleted
