"""The releases app's Celery tasks: verify a rollback, keep readiness fresh, record
unauthorized changes, build an export, dispatch and deliver webhooks. Their names are
a public API (beat entries, verb_noun).

Each takes ids, re-fetches, returns early when the row is gone, and calls a verb;
all are idempotent (a rollback concludes once; readiness is recomputed whole; an
export is claimed once), so ``acks_late`` is safe. The periodic ones take a lock.
"""

from __future__ import annotations

import logging

from celery import shared_task
from django.db import transaction

from ledger.models import Service
from releases.models import RollbackEvent
from releases.services import drift, exports, periodic_reviews, readiness, rollbacks, webhooks
from replay import services as replay_services
from replay.models import Run
from replay.services.common import try_singleton_lock

logger = logging.getLogger(__name__)


@shared_task(name="verify_rollback", acks_late=True)
def verify_rollback(rollback_id: int) -> str | None:
    """Replay the rolled-back-to target's verification set, then finish the rollback."""
    rollback = RollbackEvent.objects.filter(pk=rollback_id).first()
    if rollback is None or rollback.verification_run_id is None:
        logger.info("verify_rollback: rollback %s is gone or has nothing to verify", rollback_id)
        return None
    if rollback.state == RollbackEvent.State.VERIFYING:
        replay_services.execute_run(rollback.verification_run_id)
    rollback = rollbacks.conclude_verification(rollback_id)
    logger.info("verify_rollback: rollback %s %s", rollback_id, rollback.state)
    return rollback.state


@shared_task(name="verify_rollback_target", acks_late=True)
def verify_rollback_target(run_id: int) -> str | None:
    """Replay a rollback target's verification set (Verify now, the sweep), then judge its
    service's readiness again with the verdict."""
    run = Run.objects.select_related("revision").filter(pk=run_id).first()
    if run is None:
        logger.info("verify_rollback_target: run %s is gone", run_id)
        return None
    run = replay_services.execute_run(run_id)
    readiness.refresh_readiness(run.revision.service_id)
    logger.info("verify_rollback_target: run %s %s, %s", run_id, run.state, run.verdict)
    return run.verdict


@shared_task(name="refresh_service_readiness", acks_late=True)
def refresh_service_readiness(service_id: int) -> str | None:
    record = readiness.refresh_readiness(service_id)
    return record.verdict if record is not None else None


@shared_task(name="sweep_rollback_readiness", acks_late=True)
def sweep_rollback_readiness() -> dict[str, int]:
    """Periodic: conclude rollbacks whose verification finished elsewhere, queue the
    verification of every target that is due, and refresh every service's verdict."""
    concluded = queued = refreshed = 0
    with transaction.atomic():
        if not try_singleton_lock("sweep_rollback_readiness"):
            return {}
        for pk in RollbackEvent.objects.filter(state=RollbackEvent.State.VERIFYING).values_list(
            "pk", flat=True
        ):
            if rollbacks.conclude_verification(pk).state != RollbackEvent.State.VERIFYING:
                concluded += 1
        for service in Service.objects.select_related("team", "live_revision").iterator():
            if readiness.reverify_due_target(service) is not None:
                queued += 1
            readiness.refresh_readiness(service.pk)
            refreshed += 1
    logger.info(
        "sweep_rollback_readiness: %d concluded, %d verifications queued, %d refreshed",
        concluded,
        queued,
        refreshed,
    )
    return {"concluded": concluded, "queued": queued, "refreshed": refreshed}


@shared_task(name="record_unauthorized_changes", acks_late=True)
def record_unauthorized_changes() -> list[int]:
    """Periodic: each live backend whose latest probe found drift gets a record, once."""
    return [change.pk for change in drift.record_unauthorized_changes()]


@shared_task(name="raise_reviews", acks_late=True)
def raise_reviews() -> dict[str, int]:
    """Beat, daily: mark reviews past due overdue, and raise a review of each service whose
    cadence is due or that drifted (once: new triggers join an open review). A singleton:
    a second sweep at the same time leaves the work to the first."""
    report = periodic_reviews.sweep_reviews()
    new = sum(1 for raised in report.raised if raised.new)
    logger.info(
        "raise_reviews: %d services in %d batches, %d reviews raised, %d added to, %d overdue",
        report.scanned,
        report.batches,
        new,
        len(report.raised) - new,
        len(report.overdue),
    )
    return {
        "scanned": report.scanned,
        "raised": new,
        "added": len(report.raised) - new,
        "overdue": len(report.overdue),
    }


@shared_task(name="build_export")
def build_export(export_id: int) -> dict[str, object]:
    """Build a requested export. Idempotent: only a queued export is claimed, so a
    redelivered task finds it building or built and does nothing."""
    export = exports.build_export(export_id)
    if export is None:
        logger.info("export #%s: nothing to build (gone, built or being built)", export_id)
        return {"export": export_id, "state": "skipped"}
    logger.info("export #%s: %s, %s bytes", export.pk, export.state, export.size)
    return {"export": export.pk, "state": export.state}


@shared_task(name="dispatch_webhooks")
def dispatch_webhooks() -> int:
    """Beat, every WEBHOOK_DISPATCH_EVERY_SECONDS: queue the deliveries of new events.
    A singleton: a second one at the same time returns at once."""
    created = webhooks.dispatch()
    if created:
        logger.info("queued %d webhook deliveries", len(created))
    return len(created)


@shared_task(name="deliver_webhook", bind=True, max_retries=None)
def deliver_webhook(self, delivery_id: int, manual: bool = False) -> str:
    """One attempt of a delivery; a failed attempt is retried with back-off until the
    delivery gives up (WEBHOOK_MAX_ATTEMPTS) or its subscription is paused."""
    outcome = webhooks.deliver(delivery_id, manual=manual)
    logger.info("webhook delivery %s: %s", delivery_id, outcome.state)
    if outcome.retry_in is not None:
        raise self.retry(countdown=outcome.retry_in)
    return outcome.state
