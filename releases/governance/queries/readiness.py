"""Could this service be rolled back right now? A verdict — *ready*, *at risk*, *not
ready* — with every reason in plain words, for the service page, the incident screen,
the catalog and the API.

The target is what the rollback plan names, or else the revision that served before the
live one (read from the serving history in the event chain); never, by default, one
rolled back off the service (`releases.governance.queries.rolled_back`). Each check reads what the
registry, the evidence and replay already know; nothing here writes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Container
from dataclasses import dataclass, field
from typing import Literal

from django.utils import timezone

from ledger import queries as ledger_queries
from ledger.models import ModelAsset, Revision, Service
from ledger.validators import parse_image
from releases import policy
from releases.governance.queries.rolled_back import (
    NewestRollback,
    RolledBack,
    service_rollbacks,
)
from releases.models import RollbackEvent
from replay import queries as replay_queries
from replay.models import Run

Verdict = Literal["ready", "at risk", "not ready"]
_ORDER: list[Verdict] = ["not ready", "at risk", "ready"]
VERDICTS: tuple[Verdict, ...] = ("ready", "at risk", "not ready")

# How recent the target's verification replay must be, per service tier: the same limit
# the release gate holds a rollback plan to.
VERIFICATION_MAX_AGE_DAYS = policy.ROLLBACK_VERIFICATION_MAX_AGE_DAYS


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


NO_TARGET = Readiness(
    "not ready",
    None,
    [
        Reason(
            "not ready",
            "there is no rollback target: no plan names one and no earlier revision has served",
        )
    ],
)

# How far back the serving history is read for the previous live revision.
HISTORY_READ = 20


def previous_live_revision(
    service: Service,
    history: list[ledger_queries.ServingInterval] | None = None,
    *,
    passing_over: Container[int] = (),
) -> Revision | None:
    """The revision that served before the live one, with its asset and runtime (two
    queries, or none when the caller has read the history already), passing over the
    revision ids in `passing_over`."""
    if history is None:
        history = ledger_queries.serving_history(service, limit=HISTORY_READ)
    for interval in history:
        if (
            interval.revision_id != service.live_revision_id
            and interval.revision is not None
            and interval.revision_id not in passing_over
        ):
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
        # Unknown, not failed: as if not verified yet, and said so.
        return [
            Reason(
                "at risk",
                f"{target.label} awaits confirmation: its last verification ({when}, run "
                f"#{run.pk}) could not reach its backend, which says nothing about "
                f"{target.label}; verify it again",
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


_CACHES = (("prefix", "prefix_cache"), ("response", "response_cache"))


def _cache_reasons(newest: NewestRollback | None) -> list[Reason]:
    """After the service's newest rollback, prefixes and answers cached while the revision
    rolled back served may outlive it: at risk until someone says both caches were
    flushed, or are not in use."""
    if newest is None:
        return []
    when = f"{newest.at.astimezone(dt.UTC):%Y-%m-%d %H:%M} UTC"
    answers = {name: getattr(newest, attribute) for name, attribute in _CACHES}
    reasons = []
    unknown = [name for name, answer in answers.items() if answer == ""]
    if unknown:
        asked = (
            "were the prefix and response caches"
            if len(unknown) == 2
            else f"was the {unknown[0]} cache"
        )
        reasons.append(
            Reason(
                "at risk",
                f"caches unknown: {asked} flushed after the rollback of {when} (rollback "
                f"#{newest.rollback_id})? Answer on the rollback's page",
            )
        )
    if answers["prefix"] == RollbackEvent.CacheAnswer.NOT_FLUSHED:
        reasons.append(
            Reason(
                "at risk",
                f"the prefix cache was not flushed after the rollback of {when}: prefixes "
                "cached while the rolled-back revision served may still be reused",
            )
        )
    if answers["response"] == RollbackEvent.CacheAnswer.NOT_FLUSHED:
        reasons.append(
            Reason(
                "at risk",
                f"the response cache was not flushed after the rollback of {when}: cached "
                "answers of the rolled-back revision may still be served",
            )
        )
    return reasons


def rollback_readiness(
    service: Service,
    target: Revision | None = None,
    *,
    expected_minutes: int | None = None,
    now: dt.datetime | None = None,
    in_flight: bool = False,
    planned: bool = True,
    rolled_back: RolledBack | None = None,
    newest_rollback: NewestRollback | None = None,
) -> Readiness:
    """The verdict and its reasons. `target` defaults to the previous live revision not
    rolled back off the service; a given target comes with its model asset and runtime
    loaded, and so does `service.live_revision` when there is one. `in_flight`: a rollout
    is running, and rolling it back keeps the live revision (the target may be the live
    one). `planned`: a release's rollback plan names the target (else it is only what
    served before). `rolled_back`: the target was rolled back off the service (someone
    chose it anyway). `newest_rollback`: the service's newest rollback, whose cache
    answers are judged (read here when the target is not given)."""
    now = now or timezone.now()
    if target is None:
        read = service_rollbacks(service.pk)
        newest_rollback = read.newest
        target = previous_live_revision(service, passing_over=read.rolled_back)
    if target is None:
        return NO_TARGET
    reasons: list[Reason] = []
    if target.pk == service.live_revision_id and not in_flight:
        reasons.append(Reason("not ready", f"the target {target.label} is the live revision"))
    if rolled_back is not None:
        reasons.append(
            Reason(
                "not ready",
                f"{rolled_back.sentence(service.slug)}; no release has put it live since",
            )
        )
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
    if target.service_id == service.pk:
        target.service = service  # what judging its evidence reads, not read again
    # Aborting a rollout goes back to what already serves all the rest of the traffic:
    # evidence of its fitness is what serving shows, not a load test's age.
    keeps_serving = in_flight and target.pk == service.live_revision_id
    if not keeps_serving and not ledger_queries.has_current_report(target, now=now):
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
    if not planned:
        reasons.append(
            Reason(
                "at risk",
                "no release recorded a rollback plan for the live revision: the target is the "
                "revision that served before, and the kind and trigger conditions are unknown",
            )
        )
    if expected_minutes is None:
        reasons.append(Reason("at risk", "how long the rollback takes is not recorded"))
    reasons.extend(_cache_reasons(newest_rollback))
    verdict: Verdict = min((r.verdict for r in reasons), key=_ORDER.index, default="ready")
    reasons.sort(key=lambda r: _ORDER.index(r.verdict))
    return Readiness(verdict, target, reasons, run)
