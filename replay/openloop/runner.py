"""The open-loop runner: every planned request starts at its planned time, whatever the server does.

No Django here. One asyncio loop, one process: a scheduler sleeps until each arrival's
planned time and starts it as a task of its own; it never waits for an answer or a free
slot (a closed loop would, and a slow server would then receive less load, hiding the
queueing a peak causes). What it cannot do is said, never skipped silently:

- *dropped*: starting would put more requests in flight than ``ceiling`` (the drill-wide
  in-flight ceiling, a shard's share of it), so the request is not sent;
- *late*: the request started more than ``late_tolerance_ms`` after its planned time
  (its lateness is recorded; it is still sent).

Each request is timed by ``replay.client.replay_one`` (TTFT at the wire, TPOT, e2e,
outcome), through the guarded client (``replay.client.make_client``): the same allowed
hosts, no redirects, credentials only to their backend. Connections are single-connection
clients taken from a free list (grown on demand, at most ``ceiling``), as ``replay_many``
does: httpcore's pool rescans all its connections on each hand-out.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import importlib
import os
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

from replay.client import BackendConfig, ReplayResult, make_client, replay_one
from replay.openloop.plan import Arrival, Plan, PlanInvalid
from replay.openloop.summary import RECORD_COLUMNS, OpenLoopSummary, RequestRecord, summarize
from replay.outbound import DestinationPolicy

DEFAULT_LATE_TOLERANCE_MS = 5.0


@dataclass
class OpenLoopResult:
    """What one runner (one shard, or the whole plan) did; ``to_json`` is compact and columnar."""

    plan: dict[str, Any]  # Plan.to_json()
    shard: int
    shards: int
    ceiling: int
    late_tolerance_ms: float
    worker: str  # host:pid of the process that ran it
    started_at: float  # wall clock (time.time()) of the plan's start
    records: list[RequestRecord] = field(default_factory=list)

    def summary(self) -> OpenLoopSummary:
        return summarize(self.records, self.plan["arrival"])

    def to_json(self) -> dict[str, Any]:
        return {
            "plan": self.plan,
            "shard": self.shard,
            "shards": self.shards,
            "ceiling": self.ceiling,
            "late_tolerance_ms": self.late_tolerance_ms,
            "worker": self.worker,
            "started_at": self.started_at,
            "columns": list(RECORD_COLUMNS),
            "rows": [record.row() for record in self.records],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> OpenLoopResult:
        if data.get("columns") != list(RECORD_COLUMNS):
            raise ValueError("columns: not this version's record layout")
        return cls(
            plan=data["plan"],
            shard=data["shard"],
            shards=data["shards"],
            ceiling=data["ceiling"],
            late_tolerance_ms=data["late_tolerance_ms"],
            worker=data["worker"],
            started_at=data["started_at"],
            records=[RequestRecord.from_row(row) for row in data["rows"]],
        )


GC_THRESHOLD = (20_000, 50, 50)


@contextlib.contextmanager
def quiet_gc() -> Iterator[None]:
    """Fewer and shorter garbage-collector pauses while starts are being timed.

    A full collection over a worker's modules, the plan and hundreds of open streams
    stopped the loop for ~100 ms (gen-1 ones for ~10 ms) at 50/s against a slow
    server: every start due meanwhile was that late. What exists before the run is
    frozen (never scanned again until the run ends) and collections come ~30x less
    often; the previous settings come back afterwards.
    """
    before = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLD)
    try:
        yield
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()


def _warm_up() -> None:
    """Import what the first connection would import (anyio's asyncio backend, h11: about
    300 ms), before the clock starts rather than inside the first start."""
    importlib.import_module("anyio._backends._asyncio")
    importlib.import_module("httpcore._async.http11")


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def check_requests(plan: Plan, backend: BackendConfig) -> None:
    """Refuse, before anything is sent, a sample the client would refuse to send."""
    errors = {}
    for m, entry in enumerate(plan.mix):
        for s, sample in enumerate(entry.samples):
            if not sample.rerunnable:
                continue
            try:
                sample.request.body(backend.model)
            except ValueError as error:
                errors[f"mix[{m}].samples[{s}]"] = f"{sample.key}: {error}"
    if errors:
        raise PlanInvalid(errors)


async def run_open_loop(
    backend: BackendConfig,
    plan: Plan,
    *,
    ceiling: int,
    late_tolerance_ms: float = DEFAULT_LATE_TOLERANCE_MS,
    shard: int = 0,
    shards: int = 1,
    start_at: float | None = None,
) -> OpenLoopResult:
    """Run shard ``shard`` of ``shards`` of the plan; returns once every started request ended.

    ``start_at`` is the wall-clock moment (``time.time()``) of the plan's offset 0, shared
    by the shards of one drill; None: now. A ``start_at`` already past makes the first
    starts late, never earlier than planned. ``backend.concurrency`` is ignored: a replay
    limit would close the loop; ``ceiling`` bounds the requests in flight instead.
    Callers running it on their own loop wrap ``asyncio.run`` in ``quiet_gc()`` (as
    ``run_open_loop_sync`` does); several runs meant to start together share a ``start_at``.
    """
    if ceiling < 1:
        raise PlanInvalid({"ceiling": "must be at least 1"})
    check_requests(plan, backend)
    arrivals = plan.shard(shard, shards)
    records: list[RequestRecord | None] = [None] * len(arrivals)
    free: list[httpx.AsyncClient] = []
    tasks: set[asyncio.Task[None]] = set()
    in_flight = 0
    tolerance_s = late_tolerance_ms / 1000
    _warm_up()
    verify = httpx.create_ssl_context()  # loading CA files takes ~25 ms: once
    if backend.destinations is None:  # read the allow-list once, not at every new lane
        backend = dataclasses.replace(backend, destinations=DestinationPolicy.from_settings())
    wall = time.time() if start_at is None else start_at
    # The plan's offset 0 on the monotonic clock replay_one measures with (set up first:
    # the set-up above would otherwise make the first starts late).
    origin = time.perf_counter() + (wall - time.time())

    async def fire(position: int, arrival: Arrival, lane: httpx.AsyncClient) -> None:
        nonlocal in_flight
        started = time.perf_counter()
        try:
            result = await replay_one(backend, plan.request_for(arrival), client=lane)
        finally:
            in_flight -= 1
            free.append(lane)
        late = started - (origin + arrival.offset_s) > tolerance_s
        records[position] = _record(arrival, origin, started, "late" if late else "on_time", result)

    async with contextlib.AsyncExitStack() as stack:
        for position, arrival in enumerate(arrivals):
            delay = origin + arrival.offset_s - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            if in_flight >= ceiling:
                records[position] = _record(arrival, origin, None, "dropped", None)
                continue
            if free:
                lane = free.pop()
            else:
                client = make_client(backend, connections=1, verify=verify)
                lane = await stack.enter_async_context(client)
            in_flight += 1
            task = asyncio.create_task(fire(position, arrival, lane))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        while tasks:
            await asyncio.gather(*list(tasks))
    return OpenLoopResult(
        plan=plan.to_json(),
        shard=shard,
        shards=shards,
        ceiling=ceiling,
        late_tolerance_ms=late_tolerance_ms,
        worker=worker_name(),
        started_at=wall,
        records=[record for record in records if record is not None],
    )


def run_open_loop_sync(backend: BackendConfig, plan: Plan, **options: Any) -> OpenLoopResult:
    """``run_open_loop`` for synchronous callers (Celery tasks, commands, benchmarks)."""
    plan.arrivals()  # computed before the clock starts, and frozen with the rest
    with quiet_gc():
        return asyncio.run(run_open_loop(backend, plan, **options))


def _record(
    arrival: Arrival,
    origin: float,
    started: float | None,
    start: Literal["on_time", "late", "dropped"],
    result: ReplayResult | None,
) -> RequestRecord:
    return RequestRecord(
        index=arrival.index,
        planned_ms=arrival.offset_s * 1000,
        started_ms=None if started is None else (started - origin) * 1000,
        task_type=arrival.task_type,
        stage=arrival.stage,
        sample=arrival.sample_key,
        start=start,
        outcome=None if result is None else ("ok" if result.ok else result.error_code),
        ttft_ms=None if result is None else result.ttft_ms,
        e2e_ms=None if result is None else result.e2e_ms,
        tpot_ms=None if result is None else result.tpot_ms,
        request_id="" if result is None else result.request_id,
        output_tokens=None if result is None else result.output_tokens,
        input_tokens=None if result is None else result.prompt_tokens,
    )
