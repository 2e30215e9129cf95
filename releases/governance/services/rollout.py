"""The gray rollout: stages started from the plan, observations judged against the
guards, and the explicit verbs that move it — promote, hold, abort — each under the
release's row lock with an Event.

A rollout starts at stage 1 (`lifecycle.start_rollout` calls `begin_stages`). Promoting
the stage that carries traffic starts the next; starting a stage at 100 % releases the
candidate: the release becomes `released` and its to-revision the service's live
revision. A breached stage can only be rolled back (`releases.governance.services.rollbacks`) or
aborted.
"""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from ledger import services as ledger_services
from ledger.chain import append_event
from lib.actors import Actor
from releases import guards, permissions
from releases.governance.queries.rollout import CARRYING_TRAFFIC, window_end
from releases.governance.services.base import lock_release, refuse_unless
from releases.governance.services.drift import reconcile_open_changes
from releases.governance.services.errors import TransitionRefused
from releases.governance.services.readiness import refresh_readiness_on_commit
from releases.models import Observation, Release, Stage
from releases.schemas import validate_observation
from releases.stage_analysis import analysis_spec
from releases.transitions import Action

# How far ahead of the ledger's clock an observation window may end (clock skew).
CLOCK_SKEW = dt.timedelta(minutes=5)
# Raw per-request latencies kept per side of one observation.
MAX_RAW_VALUES = 100_000
# The error budget of a stage with an analysis whose plan states none (the most a plan
# may state): its own consecutive_error_limit decides instead.
ANALYSIS_ERROR_BUDGET = 100


def _stage_from_plan(release: Release, number: int, planned: dict[str, Any]) -> Stage:
    analysis = analysis_spec(planned.get("analysis"), tier=release.service.tier)
    # With an analysis, errors stop it after its consecutive_error_limit and hold the
    # stage for a person; the plan's error budget, unless it states one, breaches nothing.
    error_limit = guards.DEFAULT_ERROR_LIMIT if analysis is None else ANALYSIS_ERROR_BUDGET
    return Stage(
        release=release,
        number=number,
        traffic_pct=Decimal(str(planned["traffic_pct"])),
        observation_minutes=int(planned["observation_minutes"]),
        guards=guards.guard_specs(planned.get("guards")),
        failure_limit=planned.get("failure_limit", guards.DEFAULT_FAILURE_LIMIT),
        error_limit=planned.get("error_limit", error_limit),
        analysis=analysis.as_dict() if analysis is not None else {},
    )


def _stages_from_plan(release: Release) -> list[Stage]:
    plan = [s for s in release.gray_stages if isinstance(s, dict)]
    if not plan:
        # No gray plan (an experimental release may have none): full traffic in one step.
        plan = [{"traffic_pct": 100, "observation_minutes": 1}]
    return [_stage_from_plan(release, number, stage) for number, stage in enumerate(plan, start=1)]


def begin_stages(release: Release, *, actor: Actor, now: dt.datetime) -> Stage:
    """Copy the gray plan into stages and start the first (inside `start_rollout`)."""
    stages = Stage.objects.bulk_create(_stages_from_plan(release))
    _start(stages[0], actor=actor, now=now)
    return stages[0]


def _start(stage: Stage, *, actor: Actor, now: dt.datetime) -> None:
    stage.started_at = now
    stage.started_by = actor
    if stage.is_full:
        stage.state = Stage.State.COMPLETED
        stage.ended_at = now
        stage.ended_by = actor
        stage.state_reason = "full traffic: the candidate is live"
    else:
        stage.state = Stage.State.OBSERVING
        stage.state_reason = "awaiting observations"
    stage.save(
        update_fields=["state", "state_reason", "started_at", "started_by", "ended_at", "ended_by"]
    )
    append_event(
        actor=actor,
        action="release.stage_started",
        subject=stage.release,
        payload={
            "stage": stage.number,
            "traffic_pct": float(stage.traffic_pct),
            "observation_minutes": stage.observation_minutes,
            "guards": stage.guards,
            **({"analysis": stage.analysis} if stage.analysis else {}),
        },
    )
    if stage.is_full:
        _release_fully(stage.release, actor=actor, now=now)


def _release_fully(release: Release, *, actor: Actor, now: dt.datetime) -> None:
    """The candidate carries all traffic: released, and live on the service."""
    troubled = Observation.objects.filter(
        stage__release=release, verdict__in=("fail", "inconclusive", "error")
    ).exists()
    release.state = Release.State.RELEASED
    release.closed_at = now
    release.close_code = (
        Release.CloseCode.SUCCESSFUL_WITH_ISSUES if troubled else Release.CloseCode.SUCCESSFUL
    )
    release.save(update_fields=["state", "closed_at", "close_code", "updated_at"])
    ledger_services.set_live_revision(
        release.service,
        release.to_revision,
        actor=actor,
        reason=f"release #{release.pk} reached 100 % of traffic",
        cause={"release": release.pk},
    )
    append_event(
        actor=actor,
        action="release.released",
        subject=release,
        payload={"to_revision": release.to_revision_id, "close_code": release.close_code},
    )
    reconcile_open_changes(
        release.service,
        actor=actor,
        how=f"release #{release.pk} made {release.to_revision.label} live",
    )
    refresh_readiness_on_commit(release.service_id)


def active_stage(release: Release, *, lock: bool = False) -> Stage | None:
    stages = Stage.objects.filter(CARRYING_TRAFFIC, release=release)
    if lock:
        stages = stages.select_for_update()
    return stages.first()


def _current(release: Release, action: Action) -> Stage:
    refuse_unless(release, action)
    stage = active_stage(release, lock=True)
    if stage is None:  # the constraint keeps one; a rollout always has one until it ends
        raise TransitionRefused(
            f"Release #{release.pk} has no stage carrying traffic.", state=release.state
        )
    return stage


def _judged(stage: Stage) -> tuple[guards.StageVerdict, str]:
    observations = [
        guards.ObservationLike(verdict=o.verdict, guard_results=o.guard_results)
        for o in stage.observations.order_by("created_at", "pk")
    ]
    return guards.judge_stage(
        observations, failure_limit=stage.failure_limit, error_limit=stage.error_limit
    )


def _clean_window(start: dt.datetime, end: dt.datetime, now: dt.datetime) -> None:
    if end <= start:
        raise ValidationError({"window_end": "The window must end after it starts."})
    if end > now + CLOCK_SKEW:
        raise ValidationError(
            {"window_end": f"The window ends in the future ({end:%Y-%m-%d %H:%M %Z})."}
        )


def _clean_raw(name: str, values: Any) -> list[float]:
    if values in (None, ""):
        return []
    if not isinstance(values, list | tuple):
        raise ValidationError({name: "Expected a list of per-request latencies in ms."})
    if len(values) > MAX_RAW_VALUES:
        raise ValidationError({name: f"At most {MAX_RAW_VALUES:,} values; got {len(values):,}."})
    for index, value in enumerate(values):
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not 0 <= value < math.inf
        ):
            raise ValidationError(
                {name: f"{name}[{index}]: expected a latency in ms (a number ≥ 0), got {value!r}."}
            )
    return [float(v) for v in values]


@transaction.atomic
def record_observation(
    release: Release,
    *,
    actor: Actor,
    window_start: dt.datetime,
    window_end: dt.datetime,
    candidate: dict[str, Any],
    baseline: dict[str, Any] | None = None,
    candidate_ttft_ms: Any = None,
    baseline_ttft_ms: Any = None,
    source: str = "",
    source_error: str = "",
    stage_number: int | None = None,
    analysis_window: int | None = None,
    measurement: dict[str, Any] | None = None,
) -> Observation:
    """Store one observation of the stage carrying traffic, judged against its guards,
    and move the stage: breached, held for a person, or observing."""
    release = lock_release(release)
    permissions.ensure_can_post_observation(actor, release)
    stage = _current(release, Action.OBSERVE)
    if stage_number is not None and stage_number != stage.number:
        raise ValidationError(
            {
                "stage": f"Stage {stage_number} is not carrying traffic; stage {stage.number} "
                "is, and observations belong to it."
            }
        )
    now = timezone.now()
    _clean_window(window_start, window_end, now)
    baseline = baseline or {}
    validate_observation({"candidate": candidate, "baseline": baseline})
    candidate_raw = _clean_raw("candidate_ttft_ms", candidate_ttft_ms)
    baseline_raw = _clean_raw("baseline_ttft_ms", baseline_ttft_ms)
    verdict, results = guards.judge_observation(
        stage.guards,
        candidate=candidate,
        baseline=baseline,
        candidate_raw=candidate_raw,
        baseline_raw=baseline_raw,
        source_error=source_error.strip(),
    )
    observation = Observation.objects.create(
        stage=stage,
        window_start=window_start,
        window_end=window_end,
        source=source[:60],
        candidate=candidate,
        baseline=baseline,
        candidate_ttft_ms=candidate_raw,
        baseline_ttft_ms=baseline_raw,
        source_error=source_error.strip(),
        verdict=verdict,
        guard_results=results,
        posted_by=actor,
        created_at=now,
        analysis_window=analysis_window,
        measurement=measurement or {},
    )
    append_event(
        actor=actor,
        action="release.observation_recorded",
        subject=release,
        payload={
            "stage": stage.number,
            "observation": observation.pk,
            "verdict": verdict,
            "window": [window_start, window_end],
            "guards": {r["metric"]: r["status"] for r in results},
            "source_error": observation.source_error,
            "source": observation.source,
        },
    )
    _move_stage(stage, actor=actor)
    return observation


def _move_stage(stage: Stage, *, actor: Actor) -> None:
    verdict, why = _judged(stage)
    before = stage.state
    if verdict == "breached":
        stage.state, stage.held_by = Stage.State.BREACHED, None
    elif verdict == "held" and stage.held_by_id is None:
        stage.state = Stage.State.HELD
    elif stage.held_by_id is None:
        stage.state = Stage.State.OBSERVING
    stage.state_reason = why if stage.held_by_id is None else stage.state_reason
    stage.save(update_fields=["state", "state_reason", "held_by"])
    if stage.state != before and stage.state in (Stage.State.BREACHED, Stage.State.HELD):
        append_event(
            actor=actor,
            action=f"release.stage_{stage.state}",
            subject=stage.release,
            payload={"stage": stage.number, "why": why},
        )


def promotion_refusal(
    stage: Stage, release: Release, now: dt.datetime, *, window: bool = True
) -> str | None:
    """Why the stage may not be promoted now, or None. `window=False`: whatever its
    observation window says (what ending the window early asks)."""
    if stage.state == Stage.State.BREACHED:
        return (
            f"Stage {stage.number} is breached ({stage.state_reason}): roll back, or abort the "
            "rollout."
        )
    verdict, why = _judged(stage)
    if verdict == "failing":
        return f"Stage {stage.number}: {why}. Wait for a passing observation, or roll back."
    counted = [g for g in stage.guards if not g.get("dry_run")]
    if verdict == "awaiting" and counted and stage.state != Stage.State.HELD:
        return (
            f"Stage {stage.number} has guards but no observation yet: post one, or hold the "
            "stage and promote it once you have looked."
        )
    until = window_end(stage)
    assert until is not None  # a stage carrying traffic has started
    if window and now < until and release.path != Release.Path.EMERGENCY:
        return (
            f"The observation window of stage {stage.number} ends at "
            f"{until:%Y-%m-%d %H:%M %Z}; only the emergency path may promote before it ends."
        )
    return None


def _promote(release: Release, stage: Stage, *, actor: Actor, now: dt.datetime, note: str) -> None:
    """End `stage` (locked, carrying traffic) and start the next; at 100 % release."""
    next_stage = (
        Stage.objects.select_for_update().filter(release=release, number=stage.number + 1).first()
    )
    stage.state = Stage.State.PROMOTED
    stage.ended_at, stage.ended_by, stage.held_by = now, actor, None
    stage.save(update_fields=["state", "ended_at", "ended_by", "held_by"])
    append_event(
        actor=actor,
        action="release.promoted",
        subject=release,
        payload={
            "from_stage": stage.number,
            "to_stage": next_stage.number if next_stage else None,
            "traffic_pct": float(next_stage.traffic_pct) if next_stage else 100.0,
            "note": note,
        },
    )
    if next_stage is None:
        # A plan that stops short of 100 %: promoting its last stage releases it.
        _release_fully(release, actor=actor, now=now)
    else:
        # The locked release itself: starting a 100 % stage releases it, and the caller
        # reads the state it ends in from what the verb returns.
        next_stage.release = release
        _start(next_stage, actor=actor, now=now)


@transaction.atomic
def promote_release(release: Release, *, actor: Actor, note: str = "") -> Release:
    """End the stage carrying traffic and start the next; at 100 % the release is live."""
    release = lock_release(release)
    permissions.ensure_can_promote(actor, release)
    stage = _current(release, Action.PROMOTE)
    now = timezone.now()
    refusal = promotion_refusal(stage, release, now)
    if refusal:
        raise TransitionRefused(refusal, state=release.state)
    _promote(release, stage, actor=actor, now=now, note=note)
    return release


@transaction.atomic
def end_observation_window(release: Release, *, actor: Actor, reason: str) -> Release:
    """Platform ends the stage's observation window now, and promotes it (Argo Rollouts'
    `promote --full` for one step): only the window is set aside, with the reason on
    record; a failing, breached or unobserved stage is refused as a promotion is."""
    release = lock_release(release)
    permissions.ensure_can_end_observation_window(actor, release)
    stage = _current(release, Action.PROMOTE)
    if not reason.strip():
        raise ValidationError(
            {"reason": "Say why the window ends early: it is kept with the promotion."}
        )
    now = timezone.now()
    refusal = promotion_refusal(stage, release, now, window=False)
    if refusal:
        raise TransitionRefused(refusal, state=release.state)
    until = window_end(stage)
    assert until is not None  # a stage carrying traffic has started
    if now >= until:
        raise TransitionRefused(
            f"The observation window of stage {stage.number} ended at "
            f"{until:%Y-%m-%d %H:%M %Z}: promote it instead.",
            state=release.state,
        )
    assert stage.started_at is not None
    append_event(
        actor=actor,
        action="release.stage_window_ended",
        subject=release,
        payload={
            "stage": stage.number,
            "observation_minutes": stage.observation_minutes,
            "observed_minutes": int((now - stage.started_at).total_seconds() // 60),
            "window_ended_at": until,
            "reason": reason.strip(),
        },
    )
    _promote(release, stage, actor=actor, now=now, note=reason.strip())
    return release


@transaction.atomic
def hold_release(release: Release, *, actor: Actor, reason: str) -> Stage:
    """A person holds the stage carrying traffic: it is not promoted until someone does."""
    release = lock_release(release)
    permissions.ensure_can_hold(actor, release)
    stage = _current(release, Action.HOLD)
    if not reason.strip():
        raise ValidationError({"reason": "Say why the rollout holds, for whoever picks it up."})
    if stage.state == Stage.State.BREACHED:
        raise TransitionRefused(
            f"Stage {stage.number} is breached: roll back or abort rather than hold.",
            state=release.state,
        )
    if stage.held_by_id is not None:
        raise TransitionRefused(
            f"Stage {stage.number} is already held by {stage.held_by}.", state=release.state
        )
    stage.state, stage.held_by, stage.state_reason = Stage.State.HELD, actor, reason.strip()
    stage.save(update_fields=["state", "held_by", "state_reason"])
    append_event(
        actor=actor,
        action="release.stage_held",
        subject=release,
        payload={"stage": stage.number, "why": reason.strip()},
    )
    return stage


def end_stage(release: Release, *, actor: Actor, state: str, now: dt.datetime) -> Stage | None:
    """Take the candidate's traffic away: the stage carrying it ends as `state`."""
    stage = active_stage(release, lock=True)
    if stage is not None:
        stage.state, stage.ended_at, stage.ended_by = state, now, actor
        stage.save(update_fields=["state", "ended_at", "ended_by"])
    return stage


@transaction.atomic
def abort_release(release: Release, *, actor: Actor, reason: str) -> Release:
    """Stop a rollout before 100 %: the candidate's traffic goes back to the live revision."""
    release = lock_release(release)
    permissions.ensure_can_promote(actor, release)
    refuse_unless(release, Action.ABORT)
    if not reason.strip():
        raise ValidationError({"reason": "Say why the rollout stops."})
    now = timezone.now()
    stage = end_stage(release, actor=actor, state=Stage.State.ABORTED, now=now)
    release.state = Release.State.ABORTED
    release.closed_at = now
    release.close_code = Release.CloseCode.FAILED
    release.save(update_fields=["state", "closed_at", "close_code", "updated_at"])
    append_event(
        actor=actor,
        action="release.aborted",
        subject=release,
        payload={"stage": stage.number if stage else None, "reason": reason.strip()},
    )
    refresh_readiness_on_commit(release.service_id)
    return release


def _clean_incidents(incidents: Any) -> list[dict[str, str]]:
    if not isinstance(incidents, list):
        raise ValidationError({"incidents": 'Expected a list of {"ticket", "url"}.'})
    cleaned = []
    for index, item in enumerate(incidents):
        if not isinstance(item, dict) or not str(item.get("ticket") or "").strip():
            raise ValidationError({"incidents": f"incidents[{index}]: a ticket id is needed."})
        url = str(item.get("url") or "").strip()
        if url and not url.startswith(("https://", "http://")):
            raise ValidationError(
                {"incidents": f"incidents[{index}].url: expected an http(s) address, got {url!r}."}
            )
        cleaned.append({"ticket": str(item["ticket"]).strip()[:100], "url": url[:500]})
    return cleaned


@transaction.atomic
def close_release(
    release: Release,
    *,
    actor: Actor,
    close_code: str,
    note: str = "",
    incidents: Any = None,
) -> Release:
    """Correct how a finished release ended, and link the incidents it caused."""
    release = lock_release(release)
    permissions.ensure_can_close(actor, release)
    refuse_unless(release, Action.CLOSE)
    if close_code not in Release.CloseCode.values:
        raise ValidationError(
            {
                "close_code": f"{close_code!r} is not a close code; expected one of "
                f"{', '.join(Release.CloseCode.values)}."
            }
        )
    linked = _clean_incidents(incidents if incidents is not None else release.incidents)
    before = {
        "close_code": release.close_code,
        "close_note": release.close_note,
        "incidents": release.incidents,
    }
    release.close_code, release.close_note, release.incidents = close_code, note.strip(), linked
    release.save(update_fields=["close_code", "close_note", "incidents", "updated_at"])
    append_event(
        actor=actor,
        action="release.closed",
        subject=release,
        payload={
            "before": before,
            "after": {
                "close_code": close_code,
                "close_note": release.close_note,
                "incidents": linked,
            },
        },
    )
    return release
