"""Retention of raw replay outputs: outputs of runs finished before RETENTION_RAW_DAYS are
redacted as sensitive samples always are (digest and length kept, text dropped), and the
sweep is recorded as an Event."""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from ledger.chain import append_event
from lib.actors import Actor
from replay.models import Result

# Redacted in batches so one sweep never holds a lock on every old row at once.
BATCH = 5000


def _cutoff(now: dt.datetime | None) -> dt.datetime:
    return (now or timezone.now()) - dt.timedelta(days=settings.RETENTION_RAW_DAYS)


def purge_expired_outputs(*, actor: Actor, now: dt.datetime | None = None) -> int:
    """Redact outputs of runs finished before the cutoff; answer how many results."""
    cutoff = _cutoff(now)
    total = 0
    while True:
        with transaction.atomic():
            batch = list(
                Result.objects.select_for_update(skip_locked=True)
                .filter(run__finished_at__lt=cutoff, redacted=False)
                .exclude(output="")
                .values_list("pk", flat=True)[:BATCH]
            )
            if not batch:
                break
            Result.objects.filter(pk__in=batch).update(output="", redacted=True)
            total += len(batch)
    if total:
        with transaction.atomic():
            append_event(
                actor=actor,
                action="retention.replay_outputs_purged",
                subject=("retention", "replay-outputs"),
                subject_label="raw replay outputs",
                payload={
                    "results": total,
                    "finished_before": cutoff,
                    "retention_days": settings.RETENTION_RAW_DAYS,
                },
            )
    return total
