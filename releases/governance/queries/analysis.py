"""What each analysed stage of a release measures, as PromQL an SRE can paste into
Prometheus: per guard metric, the candidate's query and the baseline's, the plan's own
or the engine's default (`releases.stage_analysis.side_queries`), and the metrics no
query measures (their guards read inconclusive).

Before the rollout the stages are the plan's; once it started, the Stage rows' (the
plan copied with its defaults, and whether the analysis is paused). The sides are the
routed backends of the candidate and of the from-revision (the live one while a draft).
Two queries: the backends, and the stages when the caller has not read them.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ledger.models import Event
from lib.promql import MatcherError
from releases.models import Observation, Release, Stage
from releases.stage_analysis import AnalysisSpec, analysis_spec, side_queries
from replay.models import Backend


@dataclass(frozen=True)
class StageAnalysis:
    stage: int
    spec: AnalysisSpec
    # metric → {"candidate": PromQL, "baseline": PromQL, "origin": "plan" | "default"}
    queries: dict[str, dict[str, str]]
    unmeasured: list[str]
    stage_row: Stage | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def paused(self) -> bool:
        return self.stage_row is not None and self.stage_row.analysis_paused_at is not None


def _side(backends: Sequence[Backend], window_s: int) -> tuple[dict[str, str], str]:
    """The default queries of one side, and a problem when there are none."""
    if not backends:
        return {}, "no routed backend"
    engine = Counter(b.engine for b in backends).most_common(1)[0][0]
    try:
        matchers = [b.matchers for b in backends if b.engine == engine]
    except MatcherError as error:
        return {}, f"a backend's Prometheus matcher is not valid: {error}"
    return side_queries(engine, matchers, window_s=window_s), ""


def _from_revision_id(release: Release) -> int | None:
    if release.from_revision_id is not None:
        return release.from_revision_id
    return release.service.live_revision_id


def stage_analyses(release: Release, stages: Sequence[Stage] | None = None) -> list[StageAnalysis]:
    if stages is None:
        stages = list(release.stages.select_related("analysis_paused_by").order_by("number"))
    planned: list[tuple[int, dict[str, Any], list[str], Stage | None]] = []
    if stages:
        for stage in stages:
            if stage.analysis:
                metrics = [g["metric"] for g in stage.guards]
                planned.append((stage.number, stage.analysis, metrics, stage))
    else:
        for number, given in enumerate(release.gray_stages or [], start=1):
            if isinstance(given, dict) and isinstance(given.get("analysis"), dict):
                metrics = list((given.get("guards") or {}).keys())
                planned.append((number, given["analysis"], metrics, None))
    if not planned:
        return []
    sides = {"candidate": release.to_revision_id, "baseline": _from_revision_id(release)}
    backends: dict[int, list[Backend]] = {}
    for backend in Backend.objects.filter(
        revision_id__in=[r for r in sides.values() if r], routed=True
    ).order_by("name"):
        backends.setdefault(backend.revision_id, []).append(backend)
    found = []
    for number, given, metrics, row in planned:
        spec = analysis_spec(given, tier=release.service.tier)
        assert spec is not None
        defaults: dict[str, dict[str, str]] = {}
        problems = []
        for side, revision in sides.items():
            defaults[side], problem = _side(backends.get(revision or 0, []), spec.interval_s)
            if problem:
                problems.append(f"{side}: {problem}")
        queries: dict[str, dict[str, str]] = {}
        unmeasured = []
        for metric in metrics:
            if metric in spec.queries:
                queries[metric] = {**spec.queries[metric], "origin": "plan"}
            elif metric in defaults["candidate"] and metric in defaults["baseline"]:
                queries[metric] = {
                    "candidate": defaults["candidate"][metric],
                    "baseline": defaults["baseline"][metric],
                    "origin": "default",
                }
            else:
                unmeasured.append(metric)
        found.append(StageAnalysis(number, spec, queries, unmeasured, row, problems))
    return found


@dataclass(frozen=True)
class Tick:
    """One measurement of the analysis and what it did."""

    stage: int
    window_start: dt.datetime
    window_end: dt.datetime
    verdict: str
    source_error: str
    guards: list[dict[str, Any]]  # the observation's guard results
    action: str  # promote, rollback, hold, stop or ""


def analysis_timeline(release: Release, limit: int = 200) -> list[Tick]:
    """The newest `limit` measurements of the release's analysis, oldest first, each with
    the action it led to. Two queries."""
    observations = list(
        Observation.objects.filter(stage__release=release, analysis_window__isnull=False)
        .select_related("stage")
        .order_by("-created_at", "-pk")[:limit]
    )
    acted = {
        payload.get("observation"): payload.get("action", "")
        for payload in (
            event.payload_data
            for event in Event.objects.filter(
                action="release.analysis_acted",
                subject_type="releases.release",
                subject_id=str(release.pk),
            )
        )
    }
    return [
        Tick(
            stage=o.stage.number,
            window_start=o.window_start,
            window_end=o.window_end,
            verdict=o.verdict,
            source_error=o.source_error,
            guards=o.guard_results,
            action=acted.get(o.pk, ""),
        )
        for o in reversed(observations)
    ]
