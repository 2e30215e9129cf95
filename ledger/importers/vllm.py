"""vLLM `vllm bench serve --save-result` JSON, and the older
`benchmarks/benchmark_serving.py` output, which has the same keys.

One JSON object per run; `--append-result` appends one per line, and each run
becomes a level. Summary keys are ms (`mean_ttft_ms`, `p99_e2el_ms`, ...);
`--metric-percentiles` decides which pNN keys exist (default only p99, and
`median_*` stands for p50). With `--save-detailed` (always, in the old script)
the per-request arrays are there, in seconds: `ttfts`, `latencies`, `itls`
(a list per request), `input_lens`, `output_lens`, `errors`. Failed requests
stay in the arrays with a TTFT of 0.0 and a non-empty error. The file does not
say which vLLM version wrote it. `--metadata k=v` pairs are extra top-level
keys: they are kept in `meta` with the other descriptive strings.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from .fields import Node, check_latencies, float_array, numbers, run_records
from .report import Conditions, LatencyStats, Level, ParsedReport, Throughput
from .source import Probe
from .stats import computed_level, level_name

NAME = "vllm"
EXPECTED = (
    "a `vllm bench serve --save-result` JSON object "
    "(keys such as completed, duration, request_throughput, mean_ttft_ms)"
)

_METRICS = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2e": "e2el"}
_META_NUMBERS = ("num_prompts", "burstiness")


def detect(probe: Probe) -> str | None:
    record = probe.record()
    if record is None or "mean_e2e_latency_ms" in record:
        return None
    if {"mean_ttft_ms", "completed", "duration"} <= record.keys():
        return "bench-serve-jsonl" if probe.kind == "jsonl" else "bench-serve-json"
    return None


def parse(probe: Probe, variant: str) -> ParsedReport:
    warnings: list[str] = []
    levels: list[Level] = []
    meta: dict[str, str | int | float | bool | None] = {}
    for run in run_records(probe):
        if not meta:
            meta = _meta(run)
        levels.append(_level(run, warnings))
    source: Literal["computed", "tool"] = (
        "computed" if all(level.source == "computed" for level in levels) else "tool"
    )
    return ParsedReport(
        filename=probe.source.filename,
        tool="vllm",
        format=NAME,
        variant=variant,
        source=source,
        levels=levels,
        meta=meta,
        warnings=warnings,
    )


def _meta(run: Node) -> dict[str, str | int | float | bool | None]:
    meta: dict[str, str | int | float | bool | None] = {}
    for key, value in run.value.items():
        if key == "request_rate":
            continue
        if isinstance(value, str) or (key in _META_NUMBERS and isinstance(value, int | float)):
            meta[key] = value
    return meta


def conditions(run: Node) -> Conditions:
    """Load and duration of a vLLM or SGLang run."""
    cond = Conditions(concurrency=run.num("max_concurrency"), duration_s=run.num("duration"))
    rate = run.raw("request_rate")
    if isinstance(rate, str):  # vLLM writes "inf"
        try:
            rate = float(rate)
        except ValueError:
            raise run.error(f'expected a number or "inf", found {rate!r}', "request_rate") from None
    else:
        rate = run.num("request_rate")
    if rate is not None and math.isinf(rate):
        cond.request_rate_unlimited = True
    else:
        cond.request_rate = rate
    return cond


def _level(run: Node, warnings: list[str]) -> Level:
    cond = conditions(run)
    throughput = Throughput(
        requests_per_s=run.num("request_throughput"),
        output_tokens_per_s=run.num("output_throughput"),
        total_tokens_per_s=run.num("total_token_throughput"),
    )
    name = run.text("label") or level_name(cond)
    where = f" ({run.location()})" if run.line is not None else ""
    if run.has("ttfts") and (run.has("latencies") or run.has("itls")):
        return _computed(run, cond, throughput, name, warnings, where)
    completed = run.count("completed", required=True)
    failed = run.count("failed")
    if failed is None:
        errors = run.raw("errors")
        if isinstance(errors, list):
            failed = sum(1 for e in errors if e)
        else:
            warnings.append(f"the file does not say how many requests failed{where}")
    cond.count(completed, failed)
    if completed:
        inputs, outputs = run.num("total_input_tokens"), run.num("total_output_tokens")
        cond.prompt_tokens.mean = None if inputs is None else inputs / completed
        cond.output_tokens.mean = None if outputs is None else outputs / completed
    level = Level(name=name, source="tool", conditions=cond, throughput=throughput)
    for attr, key in _METRICS.items():
        setattr(level, attr, summary_stats(run, key))
    return level


def summary_stats(run: Node, metric: str) -> LatencyStats:
    """mean/pNN of one metric from `mean_<metric>_ms`-style keys (vLLM, SGLang)."""
    p50 = run.latency(f"p50_{metric}_ms")
    return LatencyStats(
        mean=run.latency(f"mean_{metric}_ms"),
        p50=p50 if p50 is not None else run.latency(f"median_{metric}_ms"),
        p90=run.latency(f"p90_{metric}_ms"),
        p95=run.latency(f"p95_{metric}_ms"),
        p99=run.latency(f"p99_{metric}_ms"),
        max=run.latency(f"max_{metric}_ms"),
    )


def _computed(
    run: Node,
    cond: Conditions,
    throughput: Throughput,
    name: str,
    warnings: list[str],
    where: str,
) -> Level:
    ttft = float_array(run, "ttfts")
    assert ttft is not None
    n = len(ttft)
    errors = run.raw("errors")
    if isinstance(errors, list):
        if len(errors) != n:
            raise run.error(f"expected {n} entries, one per request, found {len(errors)}", "errors")
        failed = np.array([bool(e) for e in errors], dtype=bool)
    else:
        failed = np.zeros(n, dtype=bool)
    ok = ~failed
    check_latencies(ttft, ok, run, "ttfts")

    gaps, sums = chunk_gaps(run, ok)

    e2e = float_array(run, "latencies", n)
    if e2e is None:
        # vLLM's latency is the last chunk's time: exactly TTFT plus the gaps.
        e2e = ttft + sums
        warnings.append(f"end-to-end latencies rebuilt as TTFT + sum of ITLs{where}")
    else:
        check_latencies(e2e, ok, run, "latencies")
    outputs = float_array(run, "output_lens", n)
    inputs = float_array(run, "input_lens", n)
    return computed_level(
        name,
        cond,
        to_ms=1000.0,
        failed=failed,
        ttft=ttft,
        e2e=e2e,
        output_tokens=outputs if outputs is not None else np.full(n, np.nan),
        input_tokens=inputs if inputs is not None else np.full(n, np.nan),
        itl=gaps,
        throughput=throughput,
    )


def chunk_gaps(run: Node, ok: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The `itls` of a vLLM or SGLang run (a list of gaps per request, seconds):
    every gap of the `ok` requests in one array, and each request's sum of
    gaps (0 for a failed one). No gaps and all sums 0 when the file has no `itls`.
    """
    n = len(ok)
    gaps: list[float] = []
    sums = np.zeros(n)
    itls = run.get("itls", required=False)
    if itls is not None:
        if not isinstance(itls.value, list) or len(itls.value) != n:
            raise itls.error(f"expected a list of {n} lists, one per request")
        for i, row in enumerate(itls.value):
            if not ok[i]:
                continue
            if not isinstance(row, list):
                raise itls.error("expected a list of numbers", i)
            row_node = Node(row, itls.source, (*itls.path, i), itls.line)
            values = numbers(row, row_node)
            check_latencies(values, None, row_node)
            gaps.extend(values.tolist())
            sums[i] = values.sum()
    return np.array(gaps, dtype=np.float64), sums
