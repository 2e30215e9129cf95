"""What a drill's run says, per task type and per stage, against the bounds it planned.

Pure: the plan's bounds and the open-loop run's records in, the results the drill keeps
out (`Drill.results`, and the API's `by_task_type`).

**Verdicts.** A task type *missed* when its p95 TTFT or p95 end to end is above its bound,
when no request of it succeeded, or when its error rate is above what the services
serving it accept (their SLO's error rate, else 1 %). Otherwise it *met* its bounds —
unless the load was not delivered as planned (starts dropped at the in-flight ceiling, or
more than 1 % of starts late): then it is *inconclusive*, as a latency measured under
less load than planned proves nothing about the peak.

**The knee.** The highest stage rate at which every task type met its bounds, each stage
judged on the requests planned inside it; for a constant or Poisson drill, its one rate.
None when no stage had every task type meet them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from replay.openloop.summary import GroupSummary, RequestRecord, group_summary, stage_bounds

LATE_SHARE_MAX = 0.01
DEFAULT_ERROR_RATE_MAX = 0.01


def _rounded(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(value, digits)


def verdict(
    figures: GroupSummary, bounds: Mapping[str, Any], error_rate_max: float
) -> tuple[str, list[str]]:
    """("met" | "missed" | "inconclusive", the reasons)."""
    if not figures["requests"]:
        return "inconclusive", ["nothing was sent"]
    missed = []
    ttft, e2e = figures["ttft_ms"]["p95"], figures["e2e_ms"]["p95"]
    if figures["ok"] == 0:
        missed.append("no request succeeded")
    else:
        if ttft is not None and bounds.get("ttft_p95_ms") and ttft > bounds["ttft_p95_ms"]:
            missed.append(f"p95 TTFT {ttft:.0f} ms > {bounds['ttft_p95_ms']:g} ms")
        if e2e is not None and bounds.get("e2e_p95_ms") and e2e > bounds["e2e_p95_ms"]:
            missed.append(f"p95 end to end {e2e:.0f} ms > {bounds['e2e_p95_ms']:g} ms")
    rate = figures["error_rate"] or 0.0
    if rate > error_rate_max:
        missed.append(f"errors {rate:.1%} > {error_rate_max:.1%}")
    if missed:
        return "missed", missed
    unreliable = []
    if figures["dropped"]:
        unreliable.append(f"{figures['dropped']} starts dropped at the in-flight ceiling")
    if (figures["late_share"] or 0) > LATE_SHARE_MAX:
        unreliable.append(f"{figures['late_share']:.1%} of starts late")
    if unreliable:
        return "inconclusive", unreliable
    return "met", []


def _figures(figures: GroupSummary) -> dict[str, Any]:
    return {
        "planned": figures["planned"],
        "requests": figures["requests"],
        "achieved_rate": _rounded(figures["achieved_rate"], 2),
        "planned_rate": _rounded(figures["planned_rate"], 2),
        "ttft_p50_ms": _rounded(figures["ttft_ms"]["p50"]),
        "ttft_p95_ms": _rounded(figures["ttft_ms"]["p95"]),
        "ttft_p99_ms": _rounded(figures["ttft_ms"]["p99"]),
        "e2e_p50_ms": _rounded(figures["e2e_ms"]["p50"]),
        "e2e_p95_ms": _rounded(figures["e2e_ms"]["p95"]),
        "e2e_p99_ms": _rounded(figures["e2e_ms"]["p99"]),
        "errors": figures["errors"],
        "error_rate_pct": _rounded(100 * (figures["error_rate"] or 0.0), 2),
        "error_codes": figures["error_codes"],
        "late": figures["late"],
        "late_pct": _rounded(100 * (figures["late_share"] or 0.0), 2),
        "dropped": figures["dropped"],
    }


def judge(
    records: Sequence[RequestRecord],
    arrival: Mapping[str, Any],
    bounds: Mapping[str, Mapping[str, Any]],
    error_rate_max: Mapping[str, float],
) -> dict[str, Any]:
    """`by_task_type`, `stages` (each with its rate and per task type verdicts), `knee_rate`
    and the overall figures, from the run's records."""
    windows = stage_bounds(dict(arrival))
    end = windows[-1][1]
    rates = (
        [stage["rate"] for stage in arrival["stages"]]
        if arrival["type"] == "ramp"
        else [arrival["rate"]]
    )
    by_type: dict[str, list[RequestRecord]] = defaultdict(list)
    by_stage: dict[tuple[int, str], list[RequestRecord]] = defaultdict(list)
    for record in records:
        by_type[record.task_type].append(record)
        by_stage[(record.stage, record.task_type)].append(record)

    by_task_type = {}
    for task_type in bounds:
        figures = group_summary(by_type.get(task_type, []), 0.0, end)
        said, reasons = verdict(
            figures, bounds[task_type], error_rate_max.get(task_type, DEFAULT_ERROR_RATE_MAX)
        )
        by_task_type[task_type] = {**_figures(figures), "verdict": said, "reasons": reasons}

    stages, knee = [], None
    for index, (begin, stage_end) in enumerate(windows):
        judged = {}
        for task_type in bounds:
            figures = group_summary(by_stage.get((index, task_type), []), begin, stage_end)
            said, reasons = verdict(
                figures, bounds[task_type], error_rate_max.get(task_type, DEFAULT_ERROR_RATE_MAX)
            )
            judged[task_type] = {
                "requests": figures["requests"],
                "ttft_p95_ms": _rounded(figures["ttft_ms"]["p95"]),
                "e2e_p95_ms": _rounded(figures["e2e_ms"]["p95"]),
                "verdict": said,
                "reasons": reasons,
            }
        whole = group_summary([r for r in records if r.stage == index], begin, stage_end)
        met = all(row["verdict"] == "met" for row in judged.values())
        if met and (knee is None or rates[index] > knee):
            knee = rates[index]
        stages.append(
            {
                "index": index,
                "rate": rates[index],
                "requests": whole["requests"],
                "achieved_rate": _rounded(whole["achieved_rate"], 2),
                "met": met,
                "by_task_type": judged,
            }
        )
    overall = group_summary(records, 0.0, end)
    return {
        **_figures(overall),
        "late_starts": overall["late"],
        "dropped_starts": overall["dropped"],
        "by_task_type": by_task_type,
        "stages": stages,
        "knee_rate": knee,
    }
