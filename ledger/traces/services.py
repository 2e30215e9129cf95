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
