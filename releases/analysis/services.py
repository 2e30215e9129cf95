"""The analysis loop: one tick measures every gray stage whose analysis is due, records an
observation of each, and acts on the verdict.

A stage is due when it carries traffic (observing, or held by an inconclusive
observation — not by a person), its analysis is not paused, and the last complete
interval since it started (`window`, counted from 1) has no observation yet. Each tick
measures the last `interval_s` seconds at one evaluation time, with the queries of all
due stages sent together (`releases.stage_analysis.batch_queries`).

All of a tick's observations are recorded together
(`governance.services.observations.record_observations`: the releases locked, a number
of queries that does not grow with the stages), each of source `prometheus` with its
window, the queries and the answers' sha256; then, where one applies, the action:

- the stage breached on a failed observation: `on_breach: rollback` records the
  rollback (the gateway's weights go back with it), `hold` stops the analysis and leaves
  the breached stage to a person;
- an error observation (Prometheus unreachable, a query refused, no samples): never a
  pass; after `consecutive_error_limit` errors in a row the stage is held for a person
  and the analysis stops, with the reason;
- an inconclusive one holds the stage (the judge does it) and the loop goes on;
- with `auto_promote`, a stage whose window has ended with every guard passing is
  promoted (at 100 % the release is released).

No decision twice: an observation per (stage, window) is unique in the database, a
window already measured is skipped under the release's lock, and the observations and
their actions commit together — a worker killed in between leaves neither, and the
next tick measures that window again. Whoever acts, the chain says
it: actions by the analysis are Events with no person and `decided_by: analysis`.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from ledger.chain import append_event
from lib import metrics
from lib.actors import Actor
from lib.promql import MatcherError
from releases import permissions
from releases.analysis.prometheus import Answer, PrometheusUnreadable, query_all
from releases.governance import services as governance
from releases.governance.queries.rollout import window_end
from releases.governance.services.base import lock_release
from releases.governance.services.errors import TransitionRefused
from releases.governance.services.observations import (
    Recorded,
    WindowMeasurement,
    record_observations,
)
from releases.governance.services.rollout import active_stage, promotion_refusal
from releases.models import Observation, Release, Stage
from releases.stage_analysis import (
    BackendSide,
    BatchQuery,
    Measured,
    batch_queries,
    measure_series,
    side_measures,
)
from replay.models import Backend

SOURCE = "prometheus"


@dataclass
class StageOutcome:
    """What one tick did for one stage (what `run_analysis` prints)."""

    release: int
    service: str
    stage: int
    window: int
    verdict: str = ""
    action: str = ""  # promote, rollback, hold, stop, or "" (keep observing)
    why: str = ""
    candidate: dict[str, Any] = field(default_factory=dict)
    baseline: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------- which stages


def _window(stage: Stage, now: dt.datetime) -> int:
    assert stage.started_at is not None
    return int((now - stage.started_at).total_seconds() // int(stage.analysis["interval_s"]))


def due_stages(now: dt.datetime) -> list[tuple[Stage, int]]:
    """Each stage due for a measurement, with its window. Two queries."""
    stages = list(
        Stage.objects.filter(
            Q(state=Stage.State.OBSERVING) | Q(state=Stage.State.HELD, held_by__isnull=True),
            analysis__has_key="source",
            analysis_paused_at__isnull=True,
        ).select_related("release__service", "release__from_revision", "release__to_revision")
    )
    windows = {stage.pk: _window(stage, now) for stage in stages}
    measured = set(
        Observation.objects.filter(
            stage__in=[s for s in stages if windows[s.pk] >= 1], analysis_window__isnull=False
        ).values_list("stage_id", "analysis_window")
    )
    return [
        (stage, windows[stage.pk])
        for stage in stages
        if windows[stage.pk] >= 1 and (stage.pk, windows[stage.pk]) not in measured
    ]


# ---------------------------------------------------------------- measuring


@dataclass
class _Plan:
    """One stage's sides and the queries that measure them."""

    stage: Stage
    window: int
    candidate: list[BackendSide]
    baseline: list[BackendSide]
    problem: str = ""  # why it cannot be measured at all (an error observation)
    custom: dict[str, dict[str, str]] = field(default_factory=dict)


def _sides(plans: list[_Plan], backends: dict[int, list[Backend]]) -> None:
    for plan in plans:
        release = plan.stage.release
        for side, revision in (
            ("candidate", release.to_revision_id),
            ("baseline", release.from_revision_id),
        ):
            found = backends.get(revision or 0, [])
            try:
                sides = [BackendSide(b.name, b.engine, tuple(b.matchers)) for b in found]
            except MatcherError as error:  # a matcher stored before it was checked
                plan.problem = f"a {side} backend's Prometheus matcher is not valid: {error}"
                continue
            if not sides:
                plan.problem = plan.problem or (
                    f"the {side} revision has no routed backend: nothing to measure"
                )
            setattr(plan, side, sides)
        plan.custom = dict(plan.stage.analysis.get("queries") or {})


def _routed_backends(revision_ids: set[int]) -> dict[int, list[Backend]]:
    found: dict[int, list[Backend]] = defaultdict(list)
    for backend in Backend.objects.filter(revision_id__in=revision_ids, routed=True).order_by(
        "name"
    ):
        found[backend.revision_id].append(backend)
    return found


def _measure(
    plans: list[_Plan], at: dt.datetime
) -> tuple[
    dict[int, Measured], dict[str, Answer | PrometheusUnreadable], dict[int, list[BatchQuery]]
]:
    """Every due stage's series, fetched together: per interval, one batch."""
    by_interval: dict[int, list[_Plan]] = defaultdict(list)
    for plan in plans:
        if not plan.problem:
            by_interval[int(plan.stage.analysis["interval_s"])].append(plan)
    batches: dict[int, list[BatchQuery]] = {}
    for interval, members in by_interval.items():
        sides = {b for plan in members for b in (*plan.candidate, *plan.baseline)}
        batches[interval] = batch_queries(sorted(sides, key=lambda b: b.backend), window_s=interval)
    custom = [
        text
        for plan in plans
        if not plan.problem
        for pair in plan.custom.values()
        for text in pair.values()
    ]
    answers = query_all([q.promql for qs in batches.values() for q in qs] + custom, at=at)
    measured: dict[int, Measured] = {}
    for interval, queries in batches.items():
        into: Measured = {}
        for query in queries:
            answer = answers[query.promql]
            if isinstance(answer, Answer):
                measure_series(query, answer.samples, into)
        measured[interval] = into
    return measured, answers, batches


def _side_values(
    plan: _Plan,
    side: str,
    measured: Measured,
    answers: dict[str, Answer | PrometheusUnreadable],
) -> tuple[dict[str, Any], str]:
    """One side's measures, or why it has none."""
    backends: list[BackendSide] = getattr(plan, side)
    values: dict[str, Any] = {}
    engines = {b.engine for b in backends}
    for engine in sorted(engines):
        names = [b.backend for b in backends if b.engine == engine]
        values.update(side_measures(engine, names, measured))
    for metric, pair in plan.custom.items():
        answer = answers[pair[side]]
        if isinstance(answer, PrometheusUnreadable):
            return {}, str(answer)
        if not answer.samples:
            return {}, f"the {side}'s query for {metric} answered no sample: {pair[side]}"
        values[metric] = round(float(answer.samples[0]["value"][1]), 4)
    if not any(key != "ttft_buckets" for key in values):
        matchers = ", ".join(f"{b.backend} {list(map(str, b.matchers))}" for b in backends)
        return {}, f"Prometheus has no samples of the {side}'s backends ({matchers})"
    return values, ""


def _unreadable(
    plan: _Plan,
    batches: dict[int, list[BatchQuery]],
    answers: dict[str, Answer | PrometheusUnreadable],
) -> str:
    interval = int(plan.stage.analysis["interval_s"])
    names = {b.backend for b in (*plan.candidate, *plan.baseline)}
    for query in batches.get(interval, []):
        if names & query.names:
            answer = answers[query.promql]
            if isinstance(answer, PrometheusUnreadable):
                return str(answer)
    return ""


# ---------------------------------------------------------------- recording and acting


def _consecutive_errors(earlier_verdicts: list[str]) -> int:
    """This error and the errors right before it (the earlier verdicts newest first)."""
    count = 1
    for verdict in earlier_verdicts:
        if verdict != Observation.Verdict.ERROR:
            break
        count += 1
    return count


def _acted(
    release: Release, *, action: str, stage: Stage, why: str, observation: Observation
) -> None:
    metrics.ANALYSIS_ACTIONS.labels(action=action).inc()
    append_event(
        actor=None,
        action="release.analysis_acted",
        subject=release,
        payload={
            "decided_by": "analysis",
            "action": action,
            "stage": stage.number,
            "observation": observation.pk,
            "why": why,
        },
    )


def _stop(stage: Stage, *, why: str, now: dt.datetime) -> None:
    stage.analysis_paused_at, stage.analysis_paused_by = now, None
    stage.analysis_pause_reason = why
    stage.save(update_fields=["analysis_paused_at", "analysis_paused_by", "analysis_pause_reason"])


def _decision(recorded: Recorded, now: dt.datetime) -> str:
    """What the analysis should do on the observation just recorded: rollback, hold,
    stop, promote, or "" (keep measuring). Reads nothing."""
    observation, stage = recorded.observation, recorded.stage
    spec = stage.analysis
    if stage.state == Stage.State.BREACHED and observation.verdict == Observation.Verdict.FAIL:
        return "rollback" if spec["on_breach"] == "rollback" else "hold"
    if observation.verdict == Observation.Verdict.ERROR:
        limit = int(spec["consecutive_error_limit"])
        return "stop" if _consecutive_errors(recorded.earlier_verdicts) >= limit else ""
    until = window_end(stage)
    if (
        spec.get("auto_promote")
        and stage.state == Stage.State.OBSERVING
        and observation.verdict == Observation.Verdict.PASS
        and until is not None
        and now >= until
    ):
        return "promote"
    return ""


def _act(recorded: Recorded, action: str, outcome: StageOutcome, now: dt.datetime) -> None:
    """Carry out `action` (the stage and release are locked and moved by
    `record_observations`)."""
    observation, stage, release = recorded.observation, recorded.stage, recorded.release
    if action in ("rollback", "hold"):
        why = f"stage {stage.number} breached: {stage.state_reason}"
        if action == "rollback":
            governance.record_rollback(
                release.service,
                actor=None,
                reason=f"The rollout analysis rolled back release #{release.pk}: {why}. "
                f"{_numbers(observation)}"[:2000],
                symptom=_symptom(observation),
            )
        else:
            _stop(stage, why=f"{why}; a person rolls back or aborts", now=now)
    elif action == "stop":
        limit = int(stage.analysis["consecutive_error_limit"])
        errors = _consecutive_errors(recorded.earlier_verdicts)
        why = (
            f"{errors} measurements in a row failed (the limit is {limit}); the last: "
            f"{observation.source_error}"
        )
        if stage.state != Stage.State.BREACHED:
            stage.state, stage.state_reason = Stage.State.HELD, f"analysis stopped: {why}"
            stage.save(update_fields=["state", "state_reason"])
        _stop(stage, why=why, now=now)
    else:
        refusal = promotion_refusal(stage, release, now)
        if refusal:
            outcome.why = f"not promoted: {refusal}"
            return
        why = f"stage {stage.number}'s window ended with every guard passing"
        governance.promote_release(release, actor=None, note=f"The rollout analysis: {why}.")
    outcome.action, outcome.why = action, why
    _acted(release, action=action, stage=stage, why=why, observation=observation)


# The failure mode (releases.governance.playbooks) a failed guard points at.
SYMPTOMS = {
    "ttft_p95_ms": "slow_first_token",
    "ttft_p99_ms": "slow_first_token",
    "structured_error_rate_pct": "structured_output_failure",
}


def _symptom(observation: Observation) -> str:
    failed = [r["metric"] for r in observation.guard_results if r.get("status") == "fail"]
    return next((SYMPTOMS[m] for m in failed if m in SYMPTOMS), "")


def _numbers(observation: Observation) -> str:
    parts = []
    for result in observation.guard_results:
        if result.get("status") == "fail":
            parts.append(
                f"{result['label']}: candidate {result.get('value')} vs baseline "
                f"{result.get('baseline')} ({result.get('why')})"
            )
    return "; ".join(parts)[:2000]


def run_tick(*, now: dt.datetime | None = None) -> list[StageOutcome]:
    """Measure every due stage once and act on each verdict."""
    at = (now or timezone.now()).replace(microsecond=0)
    due = due_stages(at)
    if not due:
        return []
    plans = [_Plan(stage, window, [], []) for stage, window in due]
    revisions = {
        r
        for plan in plans
        for r in (plan.stage.release.to_revision_id, plan.stage.release.from_revision_id)
        if r
    }
    _sides(plans, _routed_backends(revisions))
    measured, answers, batches = _measure(plans, at)
    outcomes: dict[int, StageOutcome] = {}
    measurements: list[WindowMeasurement] = []
    for plan in plans:
        release = plan.stage.release
        outcome = StageOutcome(release.pk, release.service.slug, plan.stage.number, plan.window)
        interval = int(plan.stage.analysis["interval_s"])
        problem = plan.problem or _unreadable(plan, batches, answers)
        candidate: dict[str, Any] = {}
        baseline: dict[str, Any] = {}
        if not problem:
            candidate, problem = _side_values(
                plan, "candidate", measured.get(interval, {}), answers
            )
        if not problem:
            baseline, problem = _side_values(plan, "baseline", measured.get(interval, {}), answers)
        names = {b.backend for b in (*plan.candidate, *plan.baseline)}
        used = [q.promql for q in batches.get(interval, []) if names & q.names] + [
            text for pair in plan.custom.values() for text in pair.values()
        ]
        measurement = {
            "at": at.isoformat(),
            "interval_s": interval,
            "queries": [
                {
                    "promql": text,
                    "sha256": a.sha256 if isinstance(a := answers.get(text), Answer) else None,
                }
                for text in used
            ],
        }
        if problem:
            candidate, baseline = {}, {}
        outcome.candidate, outcome.baseline = candidate, baseline
        outcomes[plan.stage.pk] = outcome
        measurements.append(
            WindowMeasurement(
                release_id=release.pk,
                stage_id=plan.stage.pk,
                window=plan.window,
                window_start=at - dt.timedelta(seconds=interval),
                window_end=at,
                candidate=candidate,
                baseline=baseline,
                source=SOURCE,
                source_error=problem,
                measurement=measurement,
            )
        )
    _record_and_act(measurements, outcomes, at)
    return list(outcomes.values())


def _record_and_act(
    measurements: list[WindowMeasurement], outcomes: dict[int, StageOutcome], at: dt.datetime
) -> None:
    """Every observation of the tick, then each action, in one transaction: an action
    commits with the observation it acts on, or neither does."""
    with transaction.atomic():
        recorded, skipped = record_observations(measurements)
        for skip in skipped:
            outcomes[skip.measurement.stage_id].why = f"not recorded: {skip.why}"
        for found in recorded:
            outcome = outcomes[found.stage.pk]
            outcome.verdict = found.observation.verdict
            action = _decision(found, at)
            if not action:
                continue
            try:
                with transaction.atomic():  # one stage's refused action leaves the others
                    _act(found, action, outcome, at)
            except (TransitionRefused, ValidationError) as refused:
                message = getattr(refused, "message", "") or "; ".join(
                    getattr(refused, "messages", [])
                )
                outcome.action, outcome.why = "", f"no action: {message}"
    for outcome in outcomes.values():
        if outcome.verdict:
            metrics.ANALYSIS_TICKS.labels(verdict=outcome.verdict).inc()
            if outcome.verdict == Observation.Verdict.ERROR:
                metrics.ANALYSIS_ERRORS.inc()


# ---------------------------------------------------------------- a person takes over


def _analysed_stage(release: Release) -> Stage:
    stage = active_stage(release, lock=True)
    if stage is None or not stage.analysis:
        raise TransitionRefused(
            f"Release #{release.pk} has no stage carrying traffic with an analysis.",
            state=release.state,
        )
    return stage


@transaction.atomic
def pause_analysis(release: Release, *, actor: Actor, reason: str) -> Stage:
    """A person pauses the analysis of the stage carrying traffic: it measures and acts
    no more until resumed (the person posts observations, holds or promotes)."""
    release = lock_release(release)
    permissions.ensure_can_hold(actor, release)
    stage = _analysed_stage(release)
    if not reason.strip():
        raise ValidationError({"reason": "Say why the analysis pauses, for whoever picks it up."})
    if stage.analysis_paused_at is not None:
        who = stage.analysis_paused_by or "the analysis itself"
        raise TransitionRefused(
            f"The analysis of stage {stage.number} is already paused by {who}: "
            f"{stage.analysis_pause_reason}",
            state=release.state,
        )
    stage.analysis_paused_at, stage.analysis_paused_by = timezone.now(), actor
    stage.analysis_pause_reason = reason.strip()
    stage.save(update_fields=["analysis_paused_at", "analysis_paused_by", "analysis_pause_reason"])
    append_event(
        actor=actor,
        action="release.analysis_paused",
        subject=release,
        payload={"stage": stage.number, "why": reason.strip()},
    )
    return stage


@transaction.atomic
def resume_analysis(release: Release, *, actor: Actor) -> Stage:
    """The analysis measures and acts again from its next window."""
    release = lock_release(release)
    permissions.ensure_can_hold(actor, release)
    stage = _analysed_stage(release)
    if stage.analysis_paused_at is None:
        raise TransitionRefused(
            f"The analysis of stage {stage.number} is running: nothing to resume.",
            state=release.state,
        )
    paused = stage.analysis_pause_reason
    stage.analysis_paused_at, stage.analysis_paused_by, stage.analysis_pause_reason = None, None, ""
    stage.save(update_fields=["analysis_paused_at", "analysis_paused_by", "analysis_pause_reason"])
    append_event(
        actor=actor,
        action="release.analysis_resumed",
        subject=release,
        payload={"stage": stage.number, "was_paused_for": paused},
    )
    return stage
