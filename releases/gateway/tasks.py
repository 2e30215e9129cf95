"""The gateway room's Celery tasks. Their names are a public API (verb_noun).

- `check_gateway`: is the running gateway doing what the ledger renders? A beat entry
  (`check-gateway`, every GATEWAY_CHECK_EVERY_MINUTES) runs it; the verb takes a
  singleton lock, so two ticks at once check once.
- `scrape_gateway_metrics`: daily, just after midnight UTC (beat entry
  `scrape-gateway-metrics`): the gateway's /metrics closes yesterday's window and each
  service it counted gets its day by tenant, task type and backend. Idempotent: a
  second scrape the same day keeps the window, and the same day again is "unchanged".
- `record_gateway_config`: record a service's rendered config after a change of
  routing. Idempotent: a config already recorded is not recorded again, so
  ``acks_late`` is safe.
"""

from __future__ import annotations

import logging

from celery import shared_task

from releases.gateway.services import checks, config_record, gateway_day

logger = logging.getLogger(__name__)


@shared_task(name="check_gateway", acks_late=True)
def check_gateway() -> str | None:
    """Periodic: compare the running gateway with the rendered config, record the outcome."""
    outcome = checks.check_gateway()
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


@shared_task(name="record_gateway_config", acks_late=True)
def record_gateway_config(causes: list[list[int]]) -> int:
    """`causes`: [service id, id of the Event that may have re-routed it], … ."""
    recorded = config_record.record_config_changes((service, event) for service, event in causes)
    logger.info("record_gateway_config: %d of %d services changed", len(recorded), len(causes))
    return len(recorded)


@shared_task(name="scrape_gateway_metrics", acks_late=True)
def scrape_gateway_metrics() -> dict[str, object] | None:
    """Daily: scrape the gateway's /metrics, record the day it closes."""
    outcome = gateway_day.scrape_gateway()
    if outcome is None:
        logger.info("scrape_gateway_metrics: no GATEWAY_URL, metrics off, or already running")
        return None
    logger.info("scrape_gateway_metrics: %s", outcome.to_json())
    return outcome.to_json()
