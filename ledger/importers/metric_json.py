"""The summary JSON AIPerf and GenAI-Perf both write (`profile_export_aiperf.json`,
`profile_export_genai_perf.json`): an object per metric, keyed by its name,
`{unit, avg, p1…p99, min, max, std}`. The counterpart of `metric_table`, which
reads the same summary as CSV."""

from __future__ import annotations

from .fields import Node
from .metric_table import TO_MS
from .report import Conditions, LatencyStats, Level, Throughput, TokenStats
from .stats import level_name


def _scale(metric: Node) -> float:
    """The factor from the metric's time unit to ms."""
    unit = metric.text("unit") or "ms"
    if unit not in TO_MS:
        raise metric.error(
            f"unknown time unit {unit!r}: expected one of {', '.join(TO_MS)}", "unit"
        )
    return TO_MS[unit]


def avg(root: Node, name: str, *, seconds: bool = False) -> float | None:
    """The metric's `avg`; with `seconds`, a time converted to seconds."""
    metric = root.obj(name, required=False)
    if metric is None:
        return None
    value = metric.num("avg")
    if seconds and value is not None:
        value *= _scale(metric) / 1000.0
    return value


def latency(root: Node, name: str) -> LatencyStats:
    metric = root.obj(name, required=False)
    if metric is None:
        return LatencyStats()
    scale = _scale(metric)
    return LatencyStats(
        mean=metric.latency("avg", scale=scale),
        p50=metric.latency("p50", scale=scale),
        p90=metric.latency("p90", scale=scale),
        p95=metric.latency("p95", scale=scale),
        p99=metric.latency("p99", scale=scale),
        max=metric.latency("max", scale=scale),
    )


def tokens(root: Node, name: str) -> TokenStats:
    metric = root.obj(name, required=False)
    if metric is None:
        return TokenStats()
    return TokenStats(mean=metric.num("avg"), p50=metric.num("p50"), p90=metric.num("p90"))


def summary_level(root: Node, cond: Conditions, latencies: dict[str, str]) -> Level:
    """The one load level of an AIPerf or GenAI-Perf summary JSON.

    `cond` carries what the two tools say differently (load, counts); `latencies`
    maps a Level attribute (ttft, tpot, itl, e2e) to the tool's metric name.
    """
    cond.prompt_tokens = tokens(root, "input_sequence_length")
    cond.output_tokens = tokens(root, "output_sequence_length")
    level = Level(
        name=level_name(cond),
        source="tool",
        conditions=cond,
        throughput=Throughput(
            requests_per_s=avg(root, "request_throughput"),
            output_tokens_per_s=avg(root, "output_token_throughput"),
            total_tokens_per_s=avg(root, "total_token_throughput"),
        ),
    )
    for attr, name in latencies.items():
        setattr(level, attr, latency(root, name))
    return level
