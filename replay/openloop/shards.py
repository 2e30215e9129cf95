"""An open-loop plan from sample sets, run by Celery worker processes as a group of shards.

A rate above what one process holds is split: shard i of n takes every n-th arrival of
the same seeded schedule (``Plan.shard``), so the shards' union is the plan exactly.
Every shard starts its clock at the same wall-clock moment (``start_at``, a few seconds
after dispatch), each with ``ceiling // n`` of the drill-wide in-flight ceiling (the
first ``ceiling % n`` shards one more).

Tasks take ids and primitives (``DrillSpec``); each worker rebuilds the plan from the
database (samples in key order, so every worker computes the same schedule) and reads
the backend's credential from its own environment.

A shard is counted whole or not at all. One that failed, or whose worker died (no
result by its deadline), is *missing*: with ``rerun_missing`` it is run once more,
alone, on a fresh clock (``reruns`` says which: those arrivals did not overlap the
other shards'), else it is reported and its arrivals are absent from the totals. A
shard message is never run after its start has passed by more than ``late_start_s``
(it ``expires``, and the task checks again): a message redelivered an hour later must
not send a drill's load to a backend.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict

from celery import group
from celery.exceptions import TimeoutError as ResultTimeout
from celery.result import AsyncResult

from replay.client import ChatRequest
from replay.models import Backend, Sample
from replay.openloop.plan import ArrivalProfile, MixEntry, Plan, PlanInvalid, PlanSample
from replay.openloop.runner import DEFAULT_LATE_TOLERANCE_MS, OpenLoopResult
from replay.openloop.summary import RECORD_COLUMNS, OpenLoopSummary, summarize

logger = logging.getLogger(__name__)

LEAD_S = 5.0  # dispatch to start: workers must receive their shard before it
LATE_START_S = 30.0  # a shard received later than this after its start is not run
RESULT_GRACE_S = 30.0  # after the last arrival plus the backend's total timeout


class MixSpec(TypedDict):
    task_type: str
    sample_set_id: int
    weight: float


class DrillSpec(TypedDict):
    """What a shard task needs, as JSON primitives."""

    backend_id: int
    mix: list[MixSpec]
    arrival: dict[str, Any]  # ArrivalProfile.from_json
    seed: int
    ceiling: int
    late_tolerance_ms: NotRequired[float]


def build_plan(spec: DrillSpec) -> Plan:
    """The plan of a spec, from the sample sets' rows (only re-runnable ones are sendable)."""
    profile = ArrivalProfile.from_json(spec.get("arrival"))
    entries = []
    for entry in spec.get("mix") or []:
        samples = Sample.objects.filter(sample_set_id=entry.get("sample_set_id")).order_by("key")
        entries.append(
            MixEntry(
                task_type=entry.get("task_type", ""),
                samples=tuple(
                    PlanSample(
                        key=s.key,
                        request=ChatRequest(messages=s.messages, params=s.params),
                        rerunnable=s.rerunnable,
                    )
                    for s in samples
                ),
                weight=entry.get("weight", 0),
            )
        )
    return Plan(profile, tuple(entries), spec.get("seed"))


def shard_ceiling(ceiling: int, shard: int, shards: int) -> int:
    return ceiling // shards + (1 if shard < ceiling % shards else 0)


def backend_of(spec: DrillSpec) -> Backend:
    backend = Backend.objects.filter(pk=spec["backend_id"]).first()
    if backend is None:
        raise PlanInvalid({"backend_id": f"backend {spec['backend_id']} does not exist"})
    return backend


@dataclass
class ShardedRun:
    """Shards in flight: what ``collect_shards`` waits for."""

    spec: DrillSpec
    shards: int
    start_at: float
    deadline: float  # wall clock: no result by then is a missing shard
    results: dict[int, AsyncResult] = field(default_factory=dict)


def _deadline(spec: DrillSpec, plan: Plan, start_at: float, grace_s: float) -> float:
    total_timeout = backend_of(spec).total_timeout_s
    return start_at + plan.profile.duration_s + total_timeout + grace_s


def dispatch_shards(
    spec: DrillSpec,
    *,
    shards: int,
    only: list[int] | None = None,
    lead_s: float = LEAD_S,
    grace_s: float = RESULT_GRACE_S,
    queue: str | None = None,
) -> ShardedRun:
    """Send shards 0..n-1 (or ``only`` those) as one Celery group, all starting ``lead_s`` from now."""
    from replay.tasks import run_open_loop_shard

    if shards < 1:
        raise PlanInvalid({"workers": "must be at least 1"})
    if spec["ceiling"] < shards:
        raise PlanInvalid({"ceiling": f"must be at least the number of shards ({shards})"})
    plan = build_plan(spec)  # refuses a bad plan here, before any worker is busy
    start_at = time.time() + lead_s
    deadline = _deadline(spec, plan, start_at, grace_s)
    indexes = list(range(shards)) if only is None else only
    options: dict[str, Any] = {
        # A datetime: Celery reads a number as seconds from now, not as a moment.
        "expires": dt.datetime.fromtimestamp(start_at + LATE_START_S, tz=dt.UTC),
        "time_limit": int(deadline - time.time()) + 60,
        "soft_time_limit": int(deadline - time.time()) + 30,
    }
    if queue:
        options["queue"] = queue
    signatures = [
        run_open_loop_shard.signature((dict(spec), i, shards, start_at), **options) for i in indexes
    ]
    result = group(signatures).apply_async()
    return ShardedRun(
        spec=spec,
        shards=shards,
        start_at=start_at,
        deadline=deadline,
        results=dict(zip(indexes, result.results, strict=True)),
    )


class MergedRun(TypedDict):
    plan: dict[str, Any]
    shards: int
    workers: int  # distinct worker processes whose shards are counted
    worker_names: list[str]
    completed: list[int]
    missing: dict[str, str]  # shard -> why (failed, no result by the deadline, expired)
    reruns: list[int]  # shards counted from their second run (alone, on a fresh clock)
    planned: int  # arrivals in the whole plan
    counted: int  # arrivals of the counted shards
    columns: list[str]
    rows: list[list[Any]]
    summary: OpenLoopSummary


def collect_shards(run: ShardedRun) -> tuple[dict[int, OpenLoopResult], dict[int, str]]:
    """Wait (until the run's deadline) for each shard: (results by shard, why each missing one is)."""
    done: dict[int, OpenLoopResult] = {}
    missing: dict[int, str] = {}
    for index, async_result in run.results.items():
        remaining = max(0.5, run.deadline - time.time())
        try:
            value = async_result.get(
                timeout=remaining, propagate=False, disable_sync_subtasks=False
            )
        except ResultTimeout:
            missing[index] = "no result by the deadline (its worker died or never took it)"
            async_result.revoke()
            continue
        if async_result.failed() or not isinstance(value, dict):
            missing[index] = f"failed: {value!r}"[:300]
        elif value.get("status") != "ok":
            missing[index] = str(value.get("reason", value.get("status")))
        else:
            done[index] = OpenLoopResult.from_json(value["result"])
        async_result.forget()
    return done, missing


def merge(
    plan: Plan,
    shards: int,
    done: dict[int, OpenLoopResult],
    missing: dict[int, str],
    reruns: list[int],
) -> MergedRun:
    """One result of the shards counted: each arrival at most once, a shard whole or not at all."""
    done, missing = dict(done), dict(missing)
    for index, result in list(done.items()):
        expected = [a.index for a in plan.shard(index, shards)]
        if sorted(r.index for r in result.records) != expected:
            del done[index]
            missing[index] = "came back without exactly its share of the arrivals: not counted"
    records = sorted((r for result in done.values() for r in result.records), key=lambda r: r.index)
    seen = Counter(r.index for r in records)
    doubled = [index for index, n in seen.items() if n > 1]
    if doubled:  # shards are disjoint by construction: this is a bug, never a total to report
        raise RuntimeError(f"arrivals counted twice: {doubled[:10]}")
    workers = sorted({result.worker for result in done.values()})
    return MergedRun(
        plan=plan.to_json(),
        shards=shards,
        workers=len(workers),
        worker_names=workers,
        completed=sorted(done),
        missing={str(i): why for i, why in sorted(missing.items())},
        reruns=sorted(i for i in reruns if i in done),
        planned=len(plan.arrivals()),
        counted=len(records),
        columns=list(RECORD_COLUMNS),
        rows=[r.row() for r in records],
        summary=summarize(records, plan.profile.to_json()),
    )


def run_sharded(
    spec: DrillSpec,
    *,
    shards: int,
    rerun_missing: bool = True,
    lead_s: float = LEAD_S,
    grace_s: float = RESULT_GRACE_S,
    queue: str | None = None,
) -> MergedRun:
    """Run the spec's plan over ``shards`` worker processes and merge what they did.

    Blocks until every shard answered or its deadline passed (the plan's duration plus
    the backend's total timeout plus a grace). Not to be called from inside a worker
    that the shards need.
    """
    plan = build_plan(spec)
    run = dispatch_shards(spec, shards=shards, lead_s=lead_s, grace_s=grace_s, queue=queue)
    done, missing = collect_shards(run)
    reruns: list[int] = []
    if missing and rerun_missing:
        logger.warning("open loop: re-running missing shards %s once", sorted(missing))
        again = dispatch_shards(
            spec, shards=shards, only=sorted(missing), lead_s=lead_s, grace_s=grace_s, queue=queue
        )
        redone, missing = collect_shards(again)
        done.update(redone)
        reruns = sorted(redone)
    return merge(plan, shards, done, missing, reruns)


def run_in_process(spec: DrillSpec) -> MergedRun:
    """The whole plan in this process, no Celery (``run_drill --workers 1``, tests): merged
    as one shard, so callers read the same shape as from ``run_sharded``."""
    plan = build_plan(spec)
    outcome = run_shard(spec, 0, 1, time.time())
    return merge(plan, 1, {0: OpenLoopResult.from_json(outcome["result"])}, {}, [])


def run_shard(spec: DrillSpec, shard: int, shards: int, start_at: float) -> dict[str, Any]:
    """One shard, in this process (what the task does): ``{"status": "ok", "result": ...}``."""
    from replay import services
    from replay.openloop.runner import run_open_loop_sync

    late = time.time() - start_at
    if late > LATE_START_S:
        return {"status": "expired", "reason": f"received {late:.0f} s after its start: not run"}
    backend = backend_of(spec)
    plan = build_plan(spec)
    result = run_open_loop_sync(
        services.backend_config(backend),
        plan,
        ceiling=shard_ceiling(spec["ceiling"], shard, shards),
        late_tolerance_ms=spec.get("late_tolerance_ms", DEFAULT_LATE_TOLERANCE_MS),
        shard=shard,
        shards=shards,
        start_at=start_at,
    )
    return {"status": "ok", "result": result.to_json()}
