"""Kubernetes inference-perf lifecycle reports. Seconds everywhere.

- `summary_lifecycle_metrics.json` and `stage_N_lifecycle_metrics.json`:
  `successes.latency.{time_to_first_token, time_per_output_token,
  inter_token_latency, request_latency}` with mean/median/pNN/max,
  `successes.throughput`, `failures.count`. A stage file also says its load
  (`load_summary.concurrency`, `requested_rate`); the run summary does not.
- `per_request_lifecycle_metrics.json`: a list of requests with `start_time`,
  `end_time`, `error`, and `info.response_metrics.output_token_times` (one
  time per streamed token). TTFT is the first token time minus the start, e2e
  the end minus the start, ITL the gaps between token times; percentiles are
  computed from them. Each request's body (`request`, the JSON sent) names
  the model.

inference-perf's `time_per_output_token` is measured to the last token, ours
(for the per-request file) to the end of the request, so the two differ a
little. The files do not say which version wrote them.
"""

from __future__ import annotations

import itertools
import math

from .fields import Node, check_latency, describe
from .report import Conditions, LatencyStats, Level, ParsedReport, Throughput, TokenStats
from .request_models import RequestModels
from .source import Probe
from .stats import RequestColumns, level_name

NAME = "inference_perf"
EXPECTED = (
    "an inference-perf summary_lifecycle_metrics.json, stage_N_lifecycle_metrics.json "
    "or per_request_lifecycle_metrics.json"
)

_LATENCIES = {
    "ttft": "time_to_first_token",
    "tpot": "time_per_output_token",
    "itl": "inter_token_latency",
    "e2e": "request_latency",
}


def detect(probe: Probe) -> str | None:
    doc = probe.doc
    if probe.kind != "json":
        return None
    if isinstance(doc, dict) and {"successes", "failures"} <= doc.keys():
        return "lifecycle-summary-json"
    first = doc[0] if isinstance(doc, list) and doc else None
    if isinstance(first, dict) and {"start_time", "end_time", "info"} <= first.keys():
        return "per-request-json"
    return None


def parse(probe: Probe, variant: str) -> ParsedReport:
    root = Node(probe.doc, probe.source)
    models = RequestModels()
    level = _per_request(root, models) if variant == "per-request-json" else _summary(root)
    return ParsedReport(
        filename=probe.source.filename,
        tool="inference-perf",
        format=NAME,
        variant=variant,
        source=level.source,
        levels=[level],
        meta=models.meta(),
        warnings=models.warnings(),
    )


def _summary(root: Node) -> Level:
    cond = Conditions(duration_s=root.num("benchmark_time_seconds"))
    load = root.obj("load_summary", required=False)
    if load is not None:
        cond.concurrency = load.num("concurrency")
        if cond.concurrency is None:
            cond.request_rate = load.num("requested_rate")
    successes = root.obj("successes")
    failures = root.obj("failures")
    assert successes is not None and failures is not None
    cond.count(successes.count("count", required=True), failures.count("count", required=True))
    cond.prompt_tokens = _tokens(successes.obj("prompt_tokens", required=False))
    cond.output_tokens = _tokens(successes.obj("output_tokens", required=False))
    throughput = successes.obj("throughput", required=False)
    level = Level(
        name=level_name(cond),
        source="tool",
        conditions=cond,
        throughput=Throughput(
            requests_per_s=throughput.num("requests_per_sec") if throughput else None,
            output_tokens_per_s=throughput.num("output_tokens_per_sec") if throughput else None,
            total_tokens_per_s=throughput.num("total_tokens_per_sec") if throughput else None,
        ),
    )
    latency = successes.obj("latency", required=False)
    if latency is not None:
        for attr, key in _LATENCIES.items():
            setattr(level, attr, _latency(latency.obj(key, required=False)))
    return level


def _latency(stats: Node | None) -> LatencyStats:
    if stats is None:
        return LatencyStats()
    return LatencyStats(
        mean=stats.latency("mean", scale=1000.0),
        p50=stats.latency("median", scale=1000.0),
        p90=stats.latency("p90", scale=1000.0),
        p95=stats.latency("p95", scale=1000.0),
        p99=stats.latency("p99", scale=1000.0),
        max=stats.latency("max", scale=1000.0),
    )


def _tokens(stats: Node | None) -> TokenStats:
    if stats is None:
        return TokenStats()
    return TokenStats(mean=stats.num("mean"), p50=stats.num("median"), p90=stats.num("p90"))


def _per_request(root: Node, models: RequestModels) -> Level:
    columns = RequestColumns(to_ms=1000.0)
    for record in _records(root):
        models.add(record.raw("request"))
        start = record.num("start_time", required=True)
        end = record.num("end_time", required=True)
        assert start is not None and end is not None
        columns.span(start, end)
        info = record.obj("info", required=False)
        response = info.obj("response_metrics", required=False) if info else None
        if record.raw("error") is not None:
            columns.add(True, math.nan, math.nan, math.nan, math.nan)
            continue
        e2e = end - start
        if not e2e >= 0:
            check_latency(e2e, record, "end_time")
        ttft = math.nan
        output_tokens = math.nan
        if response is not None:
            times = response.raw("output_token_times") or []
            if not isinstance(times, list):
                raise response.error(
                    f"expected a list, found {describe(times)}", "output_token_times"
                )
            for i, t in enumerate(times):
                if type(t) is not float and type(t) is not int:
                    raise response.error(
                        f"expected a time in seconds, found {describe(t)}", "output_token_times", i
                    )
            if times:
                ttft = times[0] - start
                if not ttft >= 0:
                    check_latency(ttft, response, "output_token_times", 0)
                columns.itl.extend(b - a for a, b in itertools.pairwise(times))
            tokens = response.num("output_tokens")
            output_tokens = float(len(times)) if tokens is None else tokens
        input_tokens = info.num("input_tokens") if info else None
        columns.add(
            False,
            ttft,
            e2e,
            output_tokens,
            math.nan if input_tokens is None else input_tokens,
        )
    if not len(columns):
        raise root.error("expected at least one request, found an empty list")
    return columns.level("run", Conditions())


def _records(root: Node) -> list[Node]:
    if not isinstance(root.value, list):
        raise root.error(f"expected a list of requests, found {describe(root.value)}")
    out = []
    for i, value in enumerate(root.value):
        if not isinstance(value, dict):
            raise root.error(f"expected an object, found {describe(value)}", i)
        out.append(Node(value, root.source, (i,)))
    return out
