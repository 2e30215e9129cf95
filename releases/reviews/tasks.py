"""The reviews' Celery task: raise the reviews that are due (a daily beat entry,
a public name)."""

from __future__ import annotations

import logging

from celery import shared_task

from releases.reviews.services import periodic_reviews

logger = logging.getLogger(__name__)


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
