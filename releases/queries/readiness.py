"""Could this service be rolled back right now? A verdict — *ready*, *at risk*, *not
ready* — with every reason in plain words, for the service page, the incident screen,
the catalog and the API.

The target is what the rollback plan names, or else the revision that served before the
live one (read from the serving history in the event chain). Each check reads what the
registry, the evidence and replay already know; nothing here writes.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Literal

from django.utils import timezone

from ledger import queries as ledger_queries
from ledger.models import ModelAsset, Revision, Service
from ledger.validators import parse_image
from replay import queries as replay_queries
from replay.models import Run

Verdict = Literal["ready", "at risk", "not ready"]
_ORDER: list[Verdict] = ["not ready", "at risk", "ready"]

# How recent the target's verification replay must be, per service tier.
VERIFICATION_MAX_AGE_DAYS: dict[str, int] = {"production": 7, "internal": 14, "experimental": 30}


@dataclass(frozen=True)
class Reason:
    verdict: Verdict  # what this reason alone would make the whole verdict
    text: str


@dataclass(frozen=True)
class Readiness:
    verdict: Verdict
    target: Revision | None
    reasons: list[Reason] = field(default_factory=list)
    last_verification: Run | None = None


def previous_live_revision(service: Service) -> Revision | None:
    """The revision that served before the live one (two queries)."""
    for interval in ledger_queries.serving_history(service, limit=20):
        if interval.revision_id != service.live_revision_id and interval.revision is not None:
            return interval.revision
    return None


def _verification_reasons(
    target: Revision, run: Run | None, tier: str, now: dt.datetime
) -> list[Reason]:
    limit = VERIFICATION_MAX_AGE_DAYS.get(tier, min(VERIFICATION_MAX_AGE_DAYS.values()))
    if run is None:
        return [Reason("at risk", f"{target.label} has never been verified by a replay run")]
    finished = run.finished_at or run.created_at
    when = f"{finished:%Y-%m-%d %H:%M} UTC"
    if run.verdict in (Run.Verdict.FAILED, Run.Verdict.REGRESSED):
        return [
            Reason(
                "not ready",
                f"its last verification ({run.sample_set.name}, {when}) {run.verdict}",
            )
        ]
    if run.verdict == Run.Verdict.ERRORED:
        return [
            Reason(
                "not ready",
                f"its last verification ({when}) could not reach the backend",
            )
        ]
    age = now - finished
    if age > dt.timedelta(days=limit):
        return [
            Reason(
                "at risk",
                f"its last verification passed {age.days} days ago ({when}); {tier} services "
                f"re-verify within {limit} days",
            )
        ]
    return []


def rollback_readiness(
    service: Service,
    target: Revision | None = None,
    *,
    expected_minutes: int | None = None,
    now: dt.datetime | None = None,
) -> Readiness:
    """The verdict and its reasons. `target` defaults to the previous live revision;
    expects `service.live_revision` loaded with its parts when there is one."""
    now = now or timezone.now()
    target = target if target is not None else previous_live_revision(service)
    if target is None:
        return Readiness(
            "not ready",
            None,
            [
                Reason(
                    "not ready",
                    "there is no rollback target: no plan names one and no "
                    "earlier revision has served",
                )
            ],
        )
    target = Revision.objects.with_parts().get(pk=target.pk)
    reasons: list[Reason] = []
    if target.pk == service.live_revision_id:
        reasons.append(Reason("not ready", f"the target {target.label} is the live revision"))
    lifecycle = target.model_asset.lifecycle
    if lifecycle == ModelAsset.Lifecycle.RETIRED:
        reasons.append(Reason("not ready", f"its model asset {target.model_asset} is retired"))
    elif lifecycle == ModelAsset.Lifecycle.DEPRECATED:
        reasons.append(Reason("at risk", f"its model asset {target.model_asset} is deprecated"))
    if not parse_image(target.runtime.image).pinned:
        reasons.append(
            Reason(
                "not ready",
                f"its runtime's image {target.runtime.image} is not pinned by digest, so a "
                "rollback may start a different image than the one that served",
            )
        )
    if not ledger_queries.current_reports(target, now=now):
        reasons.append(Reason("at risk", f"{target.label} has no current load-test evidence"))
    live = service.live_revision
    if live is not None and live.pk != target.pk:
        breaking = ledger_queries.breaking_changes(ledger_queries.revision_diff(live, target))
        for change in breaking:
            reasons.append(
                Reason("at risk", f"going back breaks callers: {change['field']} — {change['why']}")
            )
    run = replay_queries.last_verification(target)
    reasons.extend(_verification_reasons(target, run, service.tier, now))
    if expected_minutes is None:
        reasons.append(Reason("at risk", "how long the rollback takes is not recorded"))
    verdict: Verdict = min((r.verdict for r in reasons), key=_ORDER.index, default="ready")
    reasons.sort(key=lambda r: _ORDER.index(r.verdict))
    return Readiness(verdict, target, reasons, run)
