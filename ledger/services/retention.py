"""Retention of request-level load-test data: the per-request arrays of a report older
than RETENTION_RAW_DAYS are dropped (the report, its summary and its raw file's digest
stay), and the sweep is recorded as an Event. The event chain itself is never purged."""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from ledger.chain import append_event
from ledger.models import LoadTestReport, LoadTestRequestData
from lib.actors import Actor


def raw_cutoff(now: dt.datetime | None = None) -> dt.datetime:
    return (now or timezone.now()) - dt.timedelta(days=settings.RETENTION_RAW_DAYS)


@transaction.atomic
def purge_expired_request_data(*, actor: Actor, now: dt.datetime | None = None) -> int:
    """Drop request-level arrays measured before the cutoff; answer how many reports."""
    cutoff = raw_cutoff(now)
    expired = LoadTestReport.objects.select_for_update().filter(
        measured_at__lt=cutoff, has_request_data=True
    )
    ids = list(expired.values_list("pk", flat=True))
    if not ids:
        return 0
    LoadTestRequestData.objects.filter(report_id__in=ids).delete()
    LoadTestReport.objects.filter(pk__in=ids).update(has_request_data=False)
    append_event(
        actor=actor,
        action="retention.request_data_purged",
        subject=("retention", "loadtest-request-data"),
        subject_label="request-level load-test data",
        payload={
            "reports": ids,
            "measured_before": cutoff,
            "retention_days": settings.RETENTION_RAW_DAYS,
        },
    )
    return len(ids)
