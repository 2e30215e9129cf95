"""The gateway's Celery task: is the running gateway doing what the ledger renders?

A beat entry (`check-gateway`, every GATEWAY_CHECK_EVERY_MINUTES) runs it; the verb takes
a singleton lock, so two ticks at once check once. Its name is a public API (verb_noun).
"""

from __future__ import annotations

import logging

from celery import shared_task

from releases.gateway import services

logger = logging.getLogger(__name__)


@shared_task(name="check_gateway", acks_late=True)
def check_gateway() -> str | None:
    """Periodic: compare the running gateway with the rendered config, record the outcome."""
    outcome = services.check_gateway()
    if outcome is None:
        logger.info("check_gateway: no GATEWAY_URL, or another check is running")
        return None
    logger.info(
        "check_gateway: %s, %d services, %d drifted, %d findings opened%s",
        outcome.state,
        outcome.services,
        len(outcome.drifted),
        len(outcome.opened),
        f": {outcome.reason}" if outcome.reason else "",
    )
    return outcome.state
