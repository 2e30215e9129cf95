"""Audit's Celery tasks: build an export, dispatch and deliver webhooks. Their names
are a public API (beat entries). An export is claimed once and a delivery concludes
once, so a redelivered task does nothing twice."""

from __future__ import annotations

import logging

from celery import shared_task

from releases.audit.services import exports, webhooks

logger = logging.getLogger(__name__)


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
