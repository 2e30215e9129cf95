"""The open-loop load generator behind peak drills (issue 32): plan, runner, shards.

``plan`` and ``runner`` need no Django (as ``replay.client``); ``shards`` builds plans
from sample sets and runs them as a Celery group (task ``run_open_loop_shard``).
See docs/open-loop.md.
"""

from replay.openloop.plan import (
    Arrival,
    ArrivalProfile,
    MixEntry,
    Plan,
    PlanInvalid,
    PlanSample,
    Stage,
    ceiling_problem,
)
from replay.openloop.runner import (
    DEFAULT_LATE_TOLERANCE_MS,
    OpenLoopResult,
    quiet_gc,
    run_open_loop,
    run_open_loop_sync,
)
from replay.openloop.summary import OpenLoopSummary, RequestRecord, summarize

__all__ = [
    "DEFAULT_LATE_TOLERANCE_MS",
    "Arrival",
    "ArrivalProfile",
    "MixEntry",
    "OpenLoopResult",
    "OpenLoopSummary",
    "Plan",
    "PlanInvalid",
    "PlanSample",
    "RequestRecord",
    "Stage",
    "ceiling_problem",
    "quiet_gc",
    "run_open_loop",
    "run_open_loop_sync",
    "summarize",
]
