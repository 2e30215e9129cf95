"""How a rollout stands: its stages with their observations and verdicts, whether a
guard is breached, the earliest time it can reach 100 %, and how long a rollback would
take. Two queries for one release (stages, observations); one for many services.

The release page, the promote pages, the incident screen and both serializers read a
rollout from here: which stage carries traffic (`carrying_traffic`, `CARRYING_TRAFFIC`)
and when its observation window ends (`window_end`) are decided only here."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db.models import Q
from django.utils import timezone

from releases import guards
from releases.models import Observation, Release, Stage

# Observations listed per stage on a page (the newest); all are counted and judged.
OBSERVATIONS_LISTED = 10

# The stage carrying traffic, as a filter of stages: the one observing, held or breached
# (a constraint keeps at most one per release).
CARRYING_TRAFFIC = Q(state__in=Stage.ACTIVE_STATES)


def carrying_traffic(stages: Iterable[Stage]) -> Stage | None:
    """The stage carrying traffic among a release's stages, or None."""
    return next((s for s in stages if s.state in Stage.ACTIVE_STATES), None)


@dataclass(frozen=True)
class StageView:
    stage: Stage
    observations: list[Observation]  # newest first, at most OBSERVATIONS_LISTED
    counts: dict[str, int]  # verdict → how many
    verdict: guards.StageVerdict
    why: str
    window_ends_at: dt.datetime | None

    @property
    def window_open(self) -> bool:
        return self.window_ends_at is not None and timezone.now() < self.window_ends_at


@dataclass(frozen=True)
class Rollout:
    release: Release
    stages: list[StageView]
    current: StageView | None  # the stage carrying traffic
    earliest_full_at: dt.datetime | None  # None: finished, or no stage below 100 % left
    rollback_minutes: int | None
    guard_labels: dict[str, str] = field(default_factory=dict)

    @property
    def breached(self) -> bool:
        return self.current is not None and self.current.stage.state == Stage.State.BREACHED

    @property
    def held(self) -> bool:
        return self.current is not None and self.current.stage.state == Stage.State.HELD

    @property
    def observable(self) -> bool:
        """A stage carries traffic, so observations of it may be posted."""
        return self.release.state == Release.State.ROLLING_OUT and self.current is not None

    @property
    def traffic_pct(self) -> float:
        if self.release.carries_all:
            return 100.0
        return float(self.current.stage.traffic_pct) if self.current else 0.0


def window_end(stage: Stage) -> dt.datetime | None:
    """When a stage's observation window ends; None before it starts."""
    if stage.started_at is None:
        return None
    return stage.started_at + dt.timedelta(minutes=stage.observation_minutes)


def earliest_full(stages: list[Stage], now: dt.datetime) -> dt.datetime | None:
    """When the candidate can carry all traffic at the soonest: the current stage's
    window closes, then each later stage below 100 % observes its whole window."""
    current = carrying_traffic(stages)
    if current is None:
        return None
    moment = max(now, window_end(current) or now)
    for stage in stages:
        if stage.number > current.number and not stage.is_full:
            moment += dt.timedelta(minutes=stage.observation_minutes)
    return moment


def _view(stage: Stage, observations: list[Observation]) -> StageView:
    ordered = sorted(observations, key=lambda o: (o.created_at, o.pk))
    verdict, why = guards.judge_stage(
        [guards.ObservationLike(verdict=o.verdict, guard_results=o.guard_results) for o in ordered],
        failure_limit=stage.failure_limit,
        error_limit=stage.error_limit,
    )
    counts: dict[str, int] = defaultdict(int)
    for observation in ordered:
        counts[observation.verdict] += 1
    return StageView(
        stage=stage,
        observations=list(reversed(ordered))[:OBSERVATIONS_LISTED],
        counts=dict(counts),
        verdict=verdict,
        why=stage.state_reason if stage.held_by_id else why,
        window_ends_at=window_end(stage),
    )


def rollout_of(release: Release, *, now: dt.datetime | None = None) -> Rollout | None:
    """The release's rollout, or None when it never started (two queries)."""
    stages = list(
        Stage.objects.filter(release=release)
        .select_related("started_by", "ended_by", "held_by", "analysis_paused_by")
        .order_by("number")
    )
    if not stages:
        return None
    by_stage: dict[int, list[Observation]] = defaultdict(list)
    for observation in Observation.objects.filter(stage__release=release).select_related(
        "posted_by"
    ):
        by_stage[observation.stage_id].append(observation)
    views = [_view(stage, by_stage[stage.pk]) for stage in stages]
    carrying = carrying_traffic(stages)
    now = now or timezone.now()
    return Rollout(
        release=release,
        stages=views,
        current=next((v for v in views if v.stage is carrying), None),
        earliest_full_at=earliest_full(stages, now),
        rollback_minutes=release.rollback_expected_minutes,
        guard_labels={key: metric.label for key, metric in guards.GUARD_METRICS.items()},
    )


def in_flight(service_ids: Iterable[int]) -> dict[int, Stage]:
    """The stage carrying traffic for each service with a rollout in flight (one query):
    its release and the service on it, for lists that flag breached and held rollouts."""
    stages = Stage.objects.filter(
        CARRYING_TRAFFIC,
        release__state=Release.State.ROLLING_OUT,
        release__service_id__in=list(service_ids),
    ).select_related("release__service", "release__to_revision")
    return {stage.release.service_id: stage for stage in stages}


def breached_rollouts(limit: int = 20) -> list[Stage]:
    """Stages breached right now, across the fleet (home's "roll back first" list)."""
    return list(
        Stage.objects.filter(state=Stage.State.BREACHED, release__state=Release.State.ROLLING_OUT)
        .select_related("release__service", "release__to_revision")
        .order_by("-started_at")[:limit]
    )
