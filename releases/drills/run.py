"""Run a drill: its plan as open-loop arrivals against the backends of the revisions under
test, on the workers (`replay.openloop`), judged per task type, recorded on the drill.

**Where requests go.** Each task type goes to the service in scope that serves it (the
first by slug when several do), to an enabled backend of the revision under test: the
drill's revision, else the service's live revision. The backend's replay concurrency limit
is not applied (it would close the loop); the drill's in-flight ceiling is.

**Several services.** The open-loop runner sends to one backend, so a drill over several
services runs one schedule per backend at the same time, each with its task types and
its share of the arrival rate (the weights of its task types over all): for Poisson
arrivals that is exactly the thinned process; for constant and ramp arrivals the
total is the same rate, the spacing of the merged starts is not. Each part draws from
the drill's seed and its position, so a run can be repeated. The in-flight ceiling is
shared out by the same weights (at least 1 each).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.utils.translation import gettext as _

from ledger.models import Revision, Service
from lib.actors import Actor
from releases import permissions
from releases.drills.evidence import record_drill_evidence
from releases.drills.judge import DEFAULT_ERROR_RATE_MAX, judge
from releases.drills.plan import PlanRefused
from releases.drills.services import record_drill_results
from releases.governance.services.errors import TransitionRefused
from releases.models import Drill
from replay.models import Backend
from replay.openloop.runner import (
    DEFAULT_LATE_TOLERANCE_MS,
    OpenLoopResult,
    quiet_gc,
    run_open_loop,
)
from replay.openloop.shards import (
    DrillSpec,
    MergedRun,
    build_plan,
    collect_shards,
    dispatch_shards,
    merge,
)
from replay.openloop.summary import RequestRecord

SEED_STRIDE = 1_000_003  # a part's seed: the drill's plus this times its position
START_LEAD_S = 0.5  # set-up to the parts' shared start


@dataclass(frozen=True)
class Part:
    """One backend's share of a drill."""

    service: Service
    revision: Revision
    backend: Backend
    task_types: tuple[str, ...]
    share: float
    spec: DrillSpec


def _scaled(arrival: dict[str, Any], share: float) -> dict[str, Any]:
    if arrival["type"] == "ramp":
        return {
            "type": "ramp",
            "stages": [
                {"duration_s": stage["duration_s"], "rate": stage["rate"] * share}
                for stage in arrival["stages"]
            ],
        }
    return {**arrival, "rate": arrival["rate"] * share}


def parts_of(drill: Drill, *, enabled_only: bool = True) -> list[Part]:
    """Each backend's task types and spec; PlanRefused when a task type has nowhere to go.
    `enabled_only=False` also takes a disabled backend (the demo tells a run, sends none)."""
    services = list(
        drill.services.order_by("slug")
        .select_related("live_revision")
        .prefetch_related("task_types")
    )
    serves = {s.pk: {t.slug for t in s.task_types.all()} for s in services}
    errors: dict[str, str] = {}
    serving: dict[str, Service] = {}
    for entry in drill.mix:
        for service in services:
            if entry["task_type"] in serves[service.pk]:
                serving.setdefault(entry["task_type"], service)
        if entry["task_type"] not in serving:
            errors[f"mix.{entry['task_type']}"] = _(
                "no service in scope serves %(task_type)s any more."
            ) % {"task_type": entry["task_type"]}
    total = sum(entry["weight"] for entry in drill.mix) or 1.0
    grouped: dict[int, list[dict[str, Any]]] = {}
    backends: dict[int, tuple[Service, Revision, Backend]] = {}
    for service in {s.pk: s for s in serving.values()}.values():
        revision = drill.revision if drill.revision_id else service.live_revision
        if revision is None:
            errors[f"services.{service.slug}"] = _("%(service)s has no live revision to drill.") % {
                "service": service.slug
            }
            continue
        candidates = Backend.objects.filter(revision=revision).order_by("-enabled", "name")
        backend = (candidates.filter(enabled=True) if enabled_only else candidates).first()
        if backend is None:
            errors[f"services.{service.slug}"] = _(
                "%(revision)s has no enabled backend: register one (manage.py "
                "register_backend) before running the drill."
            ) % {"revision": str(revision)}
            continue
        backends[service.pk] = (service, revision, backend)
    if errors:
        raise PlanRefused(errors)
    for entry in drill.mix:
        grouped.setdefault(serving[entry["task_type"]].pk, []).append(entry)
    parts = []
    for position, (service_pk, entries) in enumerate(sorted(grouped.items())):
        service, revision, backend = backends[service_pk]
        share = sum(entry["weight"] for entry in entries) / total
        if share <= 0:
            continue
        spec = DrillSpec(
            backend_id=backend.pk,
            mix=[
                {
                    "task_type": entry["task_type"],
                    "sample_set_id": entry["sample_set"],
                    "weight": entry["weight"],
                }
                for entry in entries
            ],
            arrival=_scaled(drill.arrival, share) if len(grouped) > 1 else dict(drill.arrival),
            seed=(drill.seed + SEED_STRIDE * position) % 2**63,
            ceiling=max(1, round(drill.in_flight_ceiling * share)),
            late_tolerance_ms=DEFAULT_LATE_TOLERANCE_MS,
        )
        parts.append(
            Part(service, revision, backend, tuple(e["task_type"] for e in entries), share, spec)
        )
    return parts


def _in_process(parts: Sequence[Part]) -> list[MergedRun]:
    """Every part in this process, at the same time, on one event loop."""
    from replay import services

    plans = [build_plan(part.spec) for part in parts]
    configs = [services.backend_config(part.backend) for part in parts]
    # One clock for every part, a moment after set-up, so none starts before another.
    start_at = time.time() + START_LEAD_S

    async def together() -> list[OpenLoopResult]:
        return list(
            await asyncio.gather(
                *(
                    run_open_loop(
                        config,
                        plan,
                        ceiling=part.spec["ceiling"],
                        late_tolerance_ms=part.spec.get(
                            "late_tolerance_ms", DEFAULT_LATE_TOLERANCE_MS
                        ),
                        start_at=start_at,
                    )
                    for part, plan, config in zip(parts, plans, configs, strict=True)
                )
            )
        )

    with quiet_gc():
        results = asyncio.run(together())
    return [
        merge(plan, 1, {0: result}, {}, []) for plan, result in zip(plans, results, strict=True)
    ]


def _on_workers(parts: Sequence[Part], workers: int, queue: str | None) -> list[MergedRun]:
    """Every part as a group of shards on the workers, all dispatched before any is awaited."""
    runs = [dispatch_shards(part.spec, shards=workers, queue=queue) for part in parts]
    merged = []
    for part, run in zip(parts, runs, strict=True):
        done, missing = collect_shards(run)
        reruns: list[int] = []
        if missing:
            again = dispatch_shards(part.spec, shards=workers, only=sorted(missing), queue=queue)
            redone, missing = collect_shards(again)
            done.update(redone)
            reruns = sorted(redone)
        merged.append(merge(build_plan(part.spec), workers, done, missing, reruns))
    return merged


def _error_rate_max(parts: Sequence[Part]) -> dict[str, float]:
    limits = {}
    for part in parts:
        slo = part.service.slo_error_rate_pct
        for task_type in part.task_types:
            limits[task_type] = float(slo) / 100 if slo is not None else DEFAULT_ERROR_RATE_MAX
    return limits


def run_drill(drill: Drill, *, actor: Actor, workers: int = 0, queue: str | None = None) -> Drill:
    """Run the drill now and record what it measured. `workers=0` runs it in this process;
    N >= 1 runs it as N shards on the Celery workers (this call waits for them)."""
    permissions.ensure_can_run_drill(actor)
    if drill.state == Drill.State.CONCLUDED:
        raise TransitionRefused(
            _("Drill #%(id)s is concluded: its results are final.") % {"id": drill.pk},
            state=drill.state,
        )
    parts = parts_of(drill)
    runs = _on_workers(parts, workers, queue) if workers else _in_process(parts)
    by_part = [[RequestRecord.from_row(row) for row in run["rows"]] for run in runs]
    records = [record for part_records in by_part for record in part_records]
    results = judge(records, drill.arrival, drill.bounds, _error_rate_max(parts))
    names = sorted({name for run in runs for name in run["worker_names"]})
    results.update(
        workers=len(names),
        worker_names=names,
        shards=workers or 1,
        missing_shards={
            f"{part.backend.name}/{index}": why
            for part, run in zip(parts, runs, strict=True)
            for index, why in run["missing"].items()
        },
        reruns=sum(len(run["reruns"]) for run in runs),
        parts=[
            {
                "service": part.service.slug,
                "revision": part.revision.label,
                "backend": part.backend.name,
                "task_types": list(part.task_types),
                "share": round(part.share, 4),
                "planned": run["planned"],
                "counted": run["counted"],
            }
            for part, run in zip(parts, runs, strict=True)
        ],
        seed=drill.seed,
        evidence=record_drill_evidence(drill, parts, by_part),
    )
    return record_drill_results(drill, results, actor=actor)
