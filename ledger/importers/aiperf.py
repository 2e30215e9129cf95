"""NVIDIA AIPerf exports.

- `profile_export_aiperf.json`: the summary. Each metric is
  `{unit, avg, p1…p99, min, max, std, count, sum}`; latencies in ms.
- `profile_export_aiperf.csv`: the same summary, one row per metric with the
  unit in its name ("Time to First Token (ms)"), then a Metric,Value table.
- `profile_export.jsonl` (`--export-level records`): one record per request,
  `metadata` (ns timestamps, `benchmark_phase`) and `metrics` of
  `{value, unit}`; a failed request has a non-null `error`. Warm-up records are
  in the file and are left out here. Percentiles are computed from these.

AIPerf's `inter_token_latency` is (e2e - TTFT) / (output tokens - 1), which is
our TPOT; its `inter_chunk_latency` (the gaps between streamed chunks) is our
ITL. The records file has no load settings (concurrency, rate) and no version,
and names no model unless its records carry the request body (`payload`, as
AIPerf's raw export writes it): without one its evidence is unverified.

With a DCGM exporter reachable, AIPerf samples GPU telemetry during the run and the
summary JSON carries it under `telemetry_data.endpoints.<endpoint>.gpus.<gpu>.metrics`
(its `json_exporter`): `gpu_memory_used` as `{avg, min, max, p99, …, unit: "GB"}`,
DCGM_FI_DEV_FB_USED scaled from MiB to 10^9 bytes. The highest `max` of any GPU is the
report's GPU memory peak. AIPerf records no KV-cache use; its CSV's telemetry table
is not read.
"""

from __future__ import annotations

import math
from typing import Any

import orjson

from ledger.metrics_import.peaks import Peaks

from . import metric_json, metric_table
from .fields import Node, check_latency, describe
from .report import Conditions, Level, ParsedReport
from .request_models import RequestModels
from .source import Probe, Source, loads
from .stats import RequestColumns

NAME = "aiperf"
EXPECTED = (
    "an AIPerf profile_export_aiperf.json, profile_export_aiperf.csv "
    "or profile_export.jsonl (records)"
)

_TO_MS = metric_table.TO_MS
_LATENCIES = {
    "ttft": "time_to_first_token",
    "tpot": "inter_token_latency",
    "itl": "inter_chunk_latency",
    "e2e": "request_latency",
}
_CSV_LATENCIES = {
    "ttft": "Time to First Token",
    "tpot": "Inter Token Latency",
    "itl": "Inter Chunk Latency",
    "e2e": "Request Latency",
}


def detect(probe: Probe) -> str | None:
    doc = probe.doc if probe.kind == "json" and isinstance(probe.doc, dict) else {}
    # Early AIPerf releases wrote no version; benchmark_duration is theirs alone.
    if "aiperf_version" in doc or {"benchmark_duration", "request_latency"} <= doc.keys():
        return "summary-json"
    if probe.kind == "jsonl" and probe.first is not None:
        metadata = probe.first.get("metadata")
        if (
            isinstance(metadata, dict)
            and "metrics" in probe.first
            and ("benchmark_phase" in metadata or "request_start_ns" in metadata)
        ):
            return "records-jsonl"
    header = probe.header
    if probe.kind == "csv" and header and header[:4] == ["Metric", "avg", "min", "max"]:
        # GenAI-Perf's CSV starts the same but lists p99 first; AIPerf goes up from p1.
        rest = header[4:]
        if "p1" in rest and "p99" in rest and rest.index("p1") < rest.index("p99"):
            return "summary-csv"
    return None


def parse(probe: Probe, variant: str) -> ParsedReport:
    if variant == "records-jsonl":
        return _parse_records(probe)
    if variant == "summary-csv":
        return _parse_csv(probe)
    return _parse_summary(probe)


def _report(probe: Probe, variant: str, level: Level, **kwargs: Any) -> ParsedReport:
    return ParsedReport(
        filename=probe.source.filename,
        tool="aiperf",
        format=NAME,
        variant=variant,
        source=level.source,
        levels=[level],
        **kwargs,
    )


# --- summary JSON --------------------------------------------------------------


def _parse_summary(probe: Probe) -> ParsedReport:
    root = Node(probe.doc, probe.source)
    cond = _load_settings(root)
    cond.duration_s = metric_json.avg(root, "benchmark_duration", seconds=True)
    successful = metric_json.avg(root, "request_count")
    errored = metric_json.avg(root, "error_request_count")
    if errored is None:
        completed = metric_json.avg(root, "completed_request_count")
        if completed is not None and successful is not None:
            errored = completed - successful
        else:
            errored = sum(
                item.count("count") or 0 for item in root.items("error_summary", required=False)
            )
    cond.count(
        None if successful is None else int(successful), None if errored is None else int(errored)
    )
    level = metric_json.summary_level(root, cond, _LATENCIES)
    warnings = []
    warmup = root.obj("warmup_metrics", required=False)
    warmup_count = metric_json.avg(warmup, "request_count") if warmup else None
    if warmup_count:
        warnings.append(f"warm-up requests left out by AIPerf: {int(warmup_count)}")
    return _report(
        probe,
        "summary-json",
        level,
        tool_version=root.text("aiperf_version"),
        meta=_meta(root),
        warnings=warnings,
        peaks=_telemetry_peaks(root),
    )


_BYTES_PER_GB = 1e9
_BYTES_PER_GIB = 2**30


def _children(node: Node | None, key: str) -> list[Node]:
    """The objects under `node[key]` (a mapping of names to objects); none when absent."""
    inner = node.obj(key, required=False) if node is not None else None
    if inner is None:
        return []
    return [child for name in inner.value if (child := inner.obj(name)) is not None]


def _telemetry_peaks(root: Node) -> Peaks:
    """The highest `gpu_memory_used.max` of any GPU in AIPerf's telemetry, in GiB."""
    telemetry = root.obj("telemetry_data", required=False)
    highest: float | None = None
    for endpoint in _children(telemetry, "endpoints"):
        for gpu in _children(endpoint, "gpus"):
            metrics = gpu.obj("metrics", required=False)
            memory = metrics.obj("gpu_memory_used", required=False) if metrics else None
            if memory is None or (peak := memory.num("max")) is None:
                continue
            if memory.text("unit") != "GB":
                raise memory.error(
                    f"expected unit GB, found {describe(memory.raw('unit'))}", "unit"
                )
            if peak < 0:
                raise memory.error(f"expected GB used, at least 0; found {peak!r}", "max")
            highest = peak if highest is None else max(highest, peak)
    if highest is None:
        return {}
    return {
        "gpu_memory_peak_gib": {
            "value": round(highest * _BYTES_PER_GB / _BYTES_PER_GIB, 3),
            "source": "tool",
            "metric": "AIPerf telemetry gpu_memory_used max (DCGM_FI_DEV_FB_USED)",
            "lower_bound": False,
        }
    }


def _load_settings(root: Node) -> Conditions:
    cond = Conditions()
    config = root.obj("input_config", required=False)
    if config is None:
        return cond
    for phase in config.items("phases", required=False):
        if phase.raw("kind") == "profiling" or phase.raw("name") == "profiling":
            cond.concurrency = phase.num("concurrency")
            cond.request_rate = phase.num("request_rate") or phase.num("rate")
            return cond
    loadgen = config.obj("loadgen", required=False)
    if loadgen is not None:
        cond.concurrency = loadgen.num("concurrency")
        cond.request_rate = loadgen.num("request_rate")
    return cond


def _meta(root: Node) -> dict[str, str | int | float | bool | None]:
    meta: dict[str, str | int | float | bool | None] = {}
    config = root.value.get("input_config")
    if isinstance(config, dict):
        models = config.get("models", {}).get("items", [])
        if models and isinstance(models[0], dict):
            meta["model"] = models[0].get("name")
        endpoint = config.get("endpoint", {})
        for key in ("type", "streaming"):
            if key in endpoint:
                meta[f"endpoint_{key}"] = endpoint[key]
    if isinstance(root.raw("benchmark_id"), str):
        meta["benchmark_id"] = root.raw("benchmark_id")
    return meta


# --- summary CSV ---------------------------------------------------------------


def _parse_csv(probe: Probe) -> ParsedReport:
    source = probe.source
    rows = metric_table.read(source)
    cond = Conditions(duration_s=metric_table.value(rows, "Benchmark Duration"))
    successful = metric_table.value(rows, "Request Count")
    completed = metric_table.value(rows, "Completed Requests")
    errored = metric_table.value(rows, "Error Request Count")
    if errored is None and successful is not None and completed is not None:
        errored = completed - successful
    cond.count(
        None if successful is None else int(successful),
        None if errored is None else int(errored),
    )
    level = metric_table.summary_level(source, rows, cond, _CSV_LATENCIES)
    return _report(probe, "summary-csv", level)


# --- per-request records (JSON Lines) --------------------------------------------


def _parse_records(probe: Probe) -> ParsedReport:
    source = probe.source
    columns = RequestColumns(to_ms=1.0)
    add = columns.add
    itl_extend = columns.itl.extend
    first_start, last_end = math.inf, -math.inf
    warmup = 0
    models = RequestModels()
    for number, line in source.lines():
        if not line.strip():
            continue
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            record = loads(line, source, line=number)
        if type(record) is not dict:
            raise source.error(
                f"line {number}", f"expected a JSON object, found {describe(record)}"
            )
        metadata = record.get("metadata")
        if type(metadata) is not dict:
            raise _missing(source, number, "metadata", "an object")
        models.add(record.get("payload"))
        if metadata.get("benchmark_phase") == "warmup":
            warmup += 1
            continue
        start, end = metadata.get("request_start_ns"), metadata.get("request_end_ns")
        if type(start) is int and type(end) is int:
            first_start = min(first_start, start)
            last_end = max(last_end, end)
        if record.get("error") is not None:
            add(True, math.nan, math.nan, math.nan, math.nan)
            continue
        metrics = record.get("metrics")
        if type(metrics) is not dict:
            raise _missing(source, number, "metrics", "an object")
        e2e = _ms(metrics, "request_latency", source, number)
        if e2e is None:
            raise _missing(source, number, "metrics.request_latency", "{value, unit}")
        ttft = _ms(metrics, "time_to_first_token", source, number)
        gaps = metrics.get("inter_chunk_latency")
        if gaps is not None:
            itl_extend(_gaps_ms(gaps, source, number))
        add(
            False,
            math.nan if ttft is None else ttft,
            e2e,
            _count(metrics, "output_sequence_length", source, number),
            _count(metrics, "input_sequence_length", source, number),
        )
    if not len(columns) and not warmup:
        raise source.error(None, "no records: expected one JSON object per request")
    cond = Conditions()
    if last_end > first_start:
        cond.duration_s = (last_end - first_start) / 1e9
    warnings = [f"warm-up records left out: {warmup}"] if warmup else []
    warnings.extend(models.warnings())
    level = columns.level("profiling", cond)
    return _report(probe, "records-jsonl", level, meta=models.meta(), warnings=warnings)


def _missing(source: Source, number: int, path: str, what: str) -> Exception:
    return source.error(f"line {number}: {path}", f"required field is missing: expected {what}")


def _ms(metrics: dict[str, Any], name: str, source: Source, number: int) -> float | None:
    metric = metrics.get(name)
    if metric is None:
        return None
    value = metric.get("value") if type(metric) is dict else None
    if type(value) is not float and type(value) is not int:
        where = f"line {number}: metrics.{name}.value"
        raise source.error(where, f"expected a number, found {describe(value)}")
    if not value >= 0 or value == math.inf:
        node = Node(metrics, source, ("metrics",), number)
        check_latency(float(value), node, name, "value")
    unit = metric.get("unit", "ms")
    if unit != "ms":
        factor = _TO_MS.get(unit)
        if factor is None:
            raise source.error(f"line {number}: metrics.{name}.unit", f"unknown unit {unit!r}")
        value *= factor
    return value


def _gaps_ms(metric: Any, source: Source, number: int) -> list[float]:
    values = metric.get("value") if type(metric) is dict else None
    where = f"line {number}: metrics.inter_chunk_latency.value"
    if type(values) is not list:
        raise source.error(where, f"expected a list of numbers, found {describe(values)}")
    for v in values:
        if (type(v) is not float and type(v) is not int) or not v >= 0:
            raise source.error(where, f"expected latencies of at least 0, found {describe(v)}")
    unit = metric.get("unit", "ms")
    if unit != "ms":
        factor = _TO_MS.get(unit)
        if factor is None:
            raise source.error(where, f"unknown unit {unit!r}")
        values = [v * factor for v in values]
    return values


def _count(metrics: dict[str, Any], name: str, source: Source, number: int) -> float:
    metric = metrics.get(name)
    if metric is None:
        return math.nan
    value = metric.get("value") if type(metric) is dict else None
    if type(value) is not int and type(value) is not float:
        where = f"line {number}: metrics.{name}.value"
        raise source.error(where, f"expected a token count, found {describe(value)}")
    return value
