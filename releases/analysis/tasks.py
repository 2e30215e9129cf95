"""The analysis room's Celery task. Its name is a public API (verb_noun).

- `run_analysis`: one tick of the closed loop (`services.run_tick`). A beat entry
  (`run-analysis`, every ANALYSIS_TICK_SECONDS) runs it; each stage is measured at its
  own interval. Idempotent per stage and window, so ``acks_late`` is safe: a tick run
  twice (a worker killed and the message redelivered) records and acts once.
"""

from __future__ import annotations

import logging

from celery import shared_task

from releases.analysis import services

logger = logging.getLogger(__name__)


@shared_task(name="run_analysis", acks_late=True)
def run_analysis() -> int:
    """Periodic: measure every gray stage whose analysis is due, and act on each verdict."""
    outcomes = services.run_tick()
    for outcome in outcomes:
        logger.info(
            "run_analysis: release #%d (%s) stage %d window %d: %s%s%s",
            outcome.release,
            outcome.service,
            outcome.stage,
            outcome.window,
            outcome.verdict or "not recorded",
            f", {outcome.action}" if outcome.action else "",
            f" ({outcome.why})" if outcome.why else "",
        )
    return len(outcomes)
