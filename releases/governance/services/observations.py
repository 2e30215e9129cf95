"""Many stages' observations recorded at once, by the system: what the rollout analysis
measured in one tick.

The same judgement and the same Events as `rollout.record_observation` (a person's or a
gateway's post), in a number of queries that does not grow with the stages: their
releases and stages locked in one statement each, their earlier observations read in
one, the observations inserted in one, the stages that moved updated in one, and every
Event appended together (`ledger.chain.append_events`). A window already measured is
skipped, so two ticks at once record it once. The caller's transaction holds it all, and
the actions that follow (`releases.analysis.services`) commit with it.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ValidationError
from django.db import connection
from django.utils import timezone

from ledger.chain import NewEvent, append_events
from releases import guards
from releases.models import Observation, Release, Stage
from releases.schemas import validate_observation
from releases.transitions import Action


@dataclass(frozen=True)
class WindowMeasurement:
    """One stage's window, as the analysis measured it."""

    release_id: int
    stage_id: int
    window: int
    window_start: dt.datetime
    window_end: dt.datetime
    candidate: dict[str, Any]
    baseline: dict[str, Any]
    source: str
    source_error: str
    measurement: dict[str, Any]


@dataclass
class Recorded:
    """An observation recorded, with its stage (locked, moved) and release (locked)."""

    observation: Observation
    stage: Stage
    release: Release
    # The stage's analysis observations before this one, newest first: their verdicts.
    earlier_verdicts: list[str] = field(default_factory=list)


@dataclass
class Skipped:
    measurement: WindowMeasurement
    why: str


def _moved(stage: Stage, verdict: str, why: str) -> str | None:
    """Apply the stage's verdict as `rollout._move_stage` does; the Event action, if any."""
    before = stage.state
    if verdict == "breached":
        stage.state, stage.held_by = Stage.State.BREACHED, None
    elif verdict == "held" and stage.held_by_id is None:
        stage.state = Stage.State.HELD
    elif stage.held_by_id is None:
        stage.state = Stage.State.OBSERVING
    stage.state_reason = why if stage.held_by_id is None else stage.state_reason
    if stage.state != before and stage.state in (Stage.State.BREACHED, Stage.State.HELD):
        return f"release.stage_{stage.state}"
    return None


def record_observations(
    measurements: list[WindowMeasurement],
) -> tuple[list[Recorded], list[Skipped]]:
    """Record each measurement as an observation of its stage, judged against its guards,
    and move the stages. Must run inside the caller's transaction."""
    if not connection.in_atomic_block:
        raise RuntimeError("record_observations must run inside transaction.atomic()")
    if not measurements:
        return [], []
    now = timezone.now()
    releases = {
        r.pk: r
        for r in Release.objects.select_for_update(of=("self",))
        .select_related("service__team", "to_revision", "from_revision", "filed_by")
        .filter(pk__in={m.release_id for m in measurements})
        .order_by("pk")
    }
    stages = {
        s.pk: s
        for s in Stage.objects.select_for_update()
        .filter(pk__in={m.stage_id for m in measurements})
        .order_by("pk")
    }
    history: dict[int, list[Observation]] = defaultdict(list)
    for before in (
        Observation.objects.filter(stage_id__in=list(stages))
        .only("stage_id", "verdict", "guard_results", "analysis_window", "created_at")
        .order_by("created_at", "pk")
    ):
        history[before.stage_id].append(before)
    recorded: list[Recorded] = []
    skipped: list[Skipped] = []
    events: list[NewEvent] = []
    moved: list[Stage] = []
    for m in measurements:
        release, stage = releases.get(m.release_id), stages.get(m.stage_id)
        why = _refusal(release, stage, m, history)
        if why:
            skipped.append(Skipped(m, why))
            continue
        assert release is not None and stage is not None
        try:
            validate_observation({"candidate": m.candidate, "baseline": m.baseline})
        except ValidationError as error:
            skipped.append(Skipped(m, "; ".join(error.messages)))
            continue
        verdict, results = guards.judge_observation(
            stage.guards, candidate=m.candidate, baseline=m.baseline, source_error=m.source_error
        )
        observation = Observation(
            stage=stage,
            window_start=m.window_start,
            window_end=m.window_end,
            source=m.source[:60],
            candidate=m.candidate,
            baseline=m.baseline,
            source_error=m.source_error,
            verdict=verdict,
            guard_results=results,
            created_at=now,
            analysis_window=m.window,
            measurement=m.measurement,
        )
        earlier = history[stage.pk]
        stage_verdict, stage_why = guards.judge_stage(
            [
                guards.ObservationLike(verdict=o.verdict, guard_results=o.guard_results)
                for o in [*earlier, observation]
            ],
            failure_limit=stage.failure_limit,
            error_limit=stage.error_limit,
        )
        state_event = _moved(stage, stage_verdict, stage_why)
        moved.append(stage)
        recorded.append(
            Recorded(
                observation,
                stage,
                release,
                [
                    o.verdict
                    for o in sorted(
                        (o for o in earlier if o.analysis_window is not None),
                        key=lambda o: o.analysis_window or 0,
                        reverse=True,
                    )
                ],
            )
        )
        earlier.append(observation)
        if state_event:
            events.append(
                NewEvent(
                    action=state_event,
                    subject=release,
                    payload={"stage": stage.number, "why": stage_why},
                    service_id=release.service_id,
                )
            )
    Observation.objects.bulk_create([r.observation for r in recorded])
    Stage.objects.bulk_update(moved, ["state", "state_reason", "held_by"])
    observed = [
        NewEvent(
            action="release.observation_recorded",
            subject=r.release,
            payload={
                "stage": r.stage.number,
                "observation": r.observation.pk,
                "verdict": r.observation.verdict,
                "window": [r.observation.window_start, r.observation.window_end],
                "guards": {g["metric"]: g["status"] for g in r.observation.guard_results},
                "source_error": r.observation.source_error,
                "source": r.observation.source,
            },
            service_id=r.release.service_id,
        )
        for r in recorded
    ]
    append_events(observed + events, actor=None)
    return recorded, skipped


def _refusal(
    release: Release | None,
    stage: Stage | None,
    m: WindowMeasurement,
    history: dict[int, list[Observation]],
) -> str:
    if release is None or stage is None or not release.allowed(Action.OBSERVE):
        return "the release no longer rolls out"
    if stage.state not in Stage.ACTIVE_STATES or stage.state == Stage.State.BREACHED:
        return f"stage {stage.number} is {stage.state}"
    if stage.held_by_id is not None:
        return f"stage {stage.number} is held by a person"
    if stage.analysis_paused_at is not None:
        return "a person paused the analysis while it measured"
    if any(o.analysis_window == m.window for o in history[stage.pk]):
        return "another tick measured this window"
    return ""
