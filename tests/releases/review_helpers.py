"""Setting the stage for review tests: days of run evidence pushed through the verb, a
previous live revision to roll back to, a review answered and ready to conclude."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from django.utils import timezone

from ledger import services as ledger_services
from ledger.models import Revision, Service
from releases.models import Review, ReviewChecklistItem
from releases.reviews.services import periodic_reviews
from tests.ledger.factories import RevisionFactory


def yesterday() -> dt.date:
    return timezone.now().astimezone(dt.UTC).date() - dt.timedelta(days=1)


def push_days(
    service: Service,
    ttft_p95_ms: Sequence[float | None],
    *,
    error_rate: float = 0.001,
    requests: int | Sequence[int] = 10_000,
    end: dt.date | None = None,
    revision: Revision | None = None,
    timeouts: int | None = None,
) -> None:
    """One gateway day per value, the last one `end` (yesterday by default), each with
    `error_rate` of its requests failed (as 503s)."""
    end = end or yesterday()
    count = len(ttft_p95_ms)
    for n, ttft in enumerate(ttft_p95_ms):
        date = end - dt.timedelta(days=count - 1 - n)
        volume = requests if isinstance(requests, int) else requests[n]
        failed = round(volume * error_rate)
        fields: dict[str, object] = {
            "requests": volume,
            "error_counts": {"503": failed} if failed else {},
        }
        if ttft is not None:
            fields.update(ttft_p50_ms=ttft / 3, ttft_p95_ms=ttft, ttft_p99_ms=ttft * 1.5)
        if timeouts is not None:
            fields["timeouts"] = timeouts
        ledger_services.record_run_summary(
            service, actor=None, date=date, revision=revision, **fields
        )


def with_previous_live(service: Service, live: Revision) -> Revision:
    """A revision that served before `live`, now the rollback target."""
    previous = RevisionFactory(service=service, runtime=live.runtime)
    ledger_services.set_live_revision(service, previous, actor=None)
    ledger_services.set_live_revision(service, live, actor=None)
    return previous


def sweep(**kwargs) -> periodic_reviews.SweepReport:
    return periodic_reviews.sweep_reviews(**kwargs)


def answer_all(review: Review, actor, answer: str = "ok", note: str = "") -> None:
    periodic_reviews.answer_checklist(
        review,
        actor=actor,
        answers=[
            {"key": key, "answer": answer, "note": note}
            for key in review.items.values_list("key", flat=True)
        ],
    )


def checklist(review: Review) -> dict[str, ReviewChecklistItem]:
    return {item.key: item for item in review.items.all()}
