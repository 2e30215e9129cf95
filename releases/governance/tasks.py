"""Governance's Celery tasks: verify a rollback and its target, keep readiness fresh,
record unauthorized changes.

Each takes ids, re-fetches, returns early when the row is gone, and calls a verb;
all are idempotent, so ``acks_late`` is safe. The periodic ones take a lock. Their
names are a public API (beat entries, verb_noun).
"""

from __future__ import annotations

import logging

from celery import shared_task
from django.db import transaction

from ledger.models import Service
from releases.governance.services import drift, readiness, rollbacks
from releases.models import RollbackEvent
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
