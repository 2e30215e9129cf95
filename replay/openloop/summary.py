"""Per-request records of an open-loop run and their summaries (overall, per task type, per stage).

No Django here. Percentiles are ``replay.stats.summarize`` (numpy's linear
interpolation, as everywhere in replay). Latencies are over the requests that
succeeded; error rates over the requests that were sent; late share over the starts
made; dropped starts are counted apart (they were never sent).

Achieved rate = starts made / the time it took to make them: the window's planned
length (the plan's, or the stage's), stretched by as much as its last start came after
the window's end. A runner that keeps up shows the planned rate; one that falls behind
shows less. ``planned_rate`` is the plan's own arrivals over the same window (with
Poisson arrivals it is not exactly the nominal rate), the figure to compare with.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import astuple, dataclass, fields
from typing import Any, Literal, TypedDict

from replay import stats


@dataclass(frozen=True, slots=True)
class RequestRecord:
    index: int  # the arrival's position in the whole plan
    planned_ms: float  # planned start, ms after the plan's start
    started_ms: float | None  # actual start (None: dropped)
    task_type: str
    stage: int
    sample: str  # the sample's key
    start: Literal["on_time", "late", "dropped"]
    outcome: (
        str | None
    )  # "ok", an error code (replay.client: http_<code>, timeout_...), None: dropped
    ttft_ms: float | None
    e2e_ms: float | None
    tpot_ms: float | None
    request_id: str  # the X-Request-Id sent, to find it in the server's logs
    output_tokens: int | None = None  # as replay.client counts them (usage, else chunks)
    input_tokens: int | None = None  # the usage's prompt tokens, when the server says

    @property
    def lateness_ms(self) -> float | None:
        return None if self.started_ms is None else self.started_ms - self.planned_ms

    def row(self) -> list[Any]:
        return [round(v, 3) if isinstance(v, float) else v for v in astuple(self)]

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> RequestRecord:
        return cls(*row)


RECORD_COLUMNS = tuple(f.name for f in fields(RequestRecord))


class Latency(TypedDict):
    p50: float | None
    p95: float | None
    p99: float | None


class GroupSummary(TypedDict):
    planned: int  # arrivals in the plan (sent + dropped)
    requests: int  # sent
    ok: int
    errors: int
    error_rate: float | None
    error_codes: dict[str, int]
    late: int
    late_share: float | None
    dropped: int
    window_s: float
    planned_rate: float
    achieved_rate: float
    lateness_ms: dict[str, float | None]  # p50, p99, max over the starts made
    ttft_ms: Latency
    e2e_ms: Latency


class OpenLoopSummary(TypedDict):
    overall: GroupSummary
    by_task_type: dict[str, GroupSummary]
    by_stage: dict[str, GroupSummary]


def _latency(values: Iterable[float]) -> Latency:
    summary = stats.summarize(list(values))
    return Latency(p50=summary["p50"], p95=summary["p95"], p99=summary["p99"])


def group_summary(records: Sequence[RequestRecord], begin_s: float, end_s: float) -> GroupSummary:
    """The figures of some records planned inside the window [begin_s, end_s)."""
    sent = [r for r in records if r.start != "dropped"]
    ok = [r for r in sent if r.outcome == "ok"]
    codes = Counter(r.outcome for r in sent if r.outcome != "ok")
    late = [r for r in sent if r.start == "late"]
    last = max((r.started_ms for r in sent if r.started_ms is not None), default=0.0) / 1000
    window = max(end_s, last) - begin_s
    lateness = stats.summarize([r.lateness_ms for r in sent if r.lateness_ms is not None])
    return GroupSummary(
        planned=len(records),
        requests=len(sent),
        ok=len(ok),
        errors=len(sent) - len(ok),
        error_rate=(len(sent) - len(ok)) / len(sent) if sent else None,
        error_codes={str(code): n for code, n in sorted(codes.items(), key=lambda c: str(c[0]))},
        late=len(late),
        late_share=len(late) / len(sent) if sent else None,
        dropped=len(records) - len(sent),
        window_s=window,
        planned_rate=len(records) / (end_s - begin_s) if end_s > begin_s else 0.0,
        achieved_rate=len(sent) / window if window > 0 else 0.0,
        lateness_ms={"p50": lateness["p50"], "p99": lateness["p99"], "max": lateness["max"]},
        ttft_ms=_latency(r.ttft_ms for r in ok if r.ttft_ms is not None),
        e2e_ms=_latency(r.e2e_ms for r in ok if r.e2e_ms is not None),
    )


def stage_bounds(arrival: dict[str, Any]) -> list[tuple[float, float]]:
    """Each stage's [start, end) in seconds, from a profile's JSON (ArrivalProfile.to_json)."""
    if arrival["type"] != "ramp":
        return [(0.0, float(arrival["duration_s"]))]
    bounds, at = [], 0.0
    for stage in arrival["stages"]:
        bounds.append((at, at + stage["duration_s"]))
        at += stage["duration_s"]
    return bounds


def summarize(records: Sequence[RequestRecord], arrival: dict[str, Any]) -> OpenLoopSummary:
    bounds = stage_bounds(arrival)
    end = bounds[-1][1]
    by_type: dict[str, list[RequestRecord]] = defaultdict(list)
    by_stage: dict[int, list[RequestRecord]] = defaultdict(list)
    for record in records:
        by_type[record.task_type].append(record)
        by_stage[record.stage].append(record)
    return OpenLoopSummary(
        overall=group_summary(records, 0.0, end),
        by_task_type={
            task_type: group_summary(group, 0.0, end)
            for task_type, group in sorted(by_type.items())
        },
        by_stage={
            str(stage): group_summary(by_stage.get(stage, []), begin, stage_end)
            for stage, (begin, stage_end) in enumerate(bounds)
        },
    )
