"""The gateway room's Celery task: record a service's rendered config after a change of
routing. Its name is a public API (verb_noun). Idempotent: a config already recorded is
not recorded again, so ``acks_late`` is safe."""

from __future__ import annotations

import logging

from celery import shared_task

from releases.gateway import services

logger = logging.getLogger(__name__)


@shared_task(name="record_gateway_config", acks_late=True)
def record_gateway_config(causes: list[list[int]]) -> int:
    """`causes`: [service id, id of the Event that may have re-routed it], … ."""
    recorded = services.record_config_changes((service, event) for service, event in causes)
    logger.info("record_gateway_config: %d of %d services changed", len(recorded), len(causes))
    return len(recorded)
