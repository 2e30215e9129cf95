"""NVIDIA GenAI-Perf exports, and perf_analyzer's per-request export under it.

- `profile_export_genai_perf.json`: the summary; each metric is
  `{unit, avg, p1…p99, min, max, std}` in ms. GenAI-Perf's
  `inter_token_latency` is (e2e - TTFT) / (output tokens - 1): our TPOT. It has
  no per-chunk ITL and does not count failed requests. No version in the file.
- `profile_export_genai_perf.csv`: the same, as two tables, numbers quoted with
  thousands separators ("1,565.62").
- `profile_export.json` (written by perf_analyzer, whose version it carries):
  `experiments[]` (one per load level, `experiment.mode`/`value`), each with
  `requests[]` holding `timestamp` and `response_timestamps[]` in ns, one per
  SSE frame, and the frames themselves in `response_outputs[]`. As GenAI-Perf
  does, frames without content (the role-only first frame, the final
  finish_reason frame, `[DONE]`) are dropped before timing: TTFT is the first
  content frame, e2e the last, ITL the gaps between content frames. Output
  tokens come from a `usage` frame when the server sent one, else they are the
  number of content frames (GenAI-Perf uses the tokenizer; most servers send
  one token per frame). A request without any content frame counts as failed.
  The model is the one the request bodies (`request_inputs.payload`) name.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import orjson

from . import metric_json, metric_table
from .fields import Node, describe
from .report import Conditions, Level, ParsedReport
from .request_models import RequestModels
from .source import Probe
from .stats import RequestColumns, level_name

NAME = "genai_perf"
EXPECTED = (
    "a GenAI-Perf profile_export_genai_perf.json or .csv, "
    "or perf_analyzer's profile_export.json (an `experiments` list)"
)

_LATENCIES = {
    "ttft": "time_to_first_token",
    "tpot": "inter_token_latency",
    "e2e": "request_latency",
}
_CSV_LATENCIES = {
    "ttft": "Time To First Token",
    "tpot": "Inter Token Latency",
    "e2e": "Request Latency",
}


def detect(probe: Probe) -> str | None:
    doc = probe.doc
    if probe.kind == "json" and isinstance(doc, dict):
        if isinstance(doc.get("experiments"), list):
            return "perf-analyzer-json"
        latency = doc.get("request_latency")
        aiperf = "aiperf_version" in doc or "benchmark_duration" in doc
        if not aiperf and isinstance(latency, dict) and "unit" in latency:
            return "summary-json"
    header = probe.header
    if probe.kind == "csv" and header and header[:4] == ["Metric", "avg", "min", "max"]:
        rest = header[4:]
        if "p1" in rest and "p99" in rest and rest.index("p99") < rest.index("p1"):
            return "summary-csv"
    return None


def parse(probe: Probe, variant: str) -> ParsedReport:
    if variant == "perf-analyzer-json":
        return _parse_perf_analyzer(probe)
    level = _summary_csv(probe) if variant == "summary-csv" else _summary_json(probe)
    meta = _meta(probe.doc) if variant == "summary-json" else {}
    return ParsedReport(
        filename=probe.source.filename,
        tool="genai-perf",
        format=NAME,
        variant=variant,
        source="tool",
        levels=[level],
        meta=meta,
    )


# --- summaries -----------------------------------------------------------------


def _summary_json(probe: Probe) -> Level:
    root = Node(probe.doc, probe.source)
    cond = _load_settings(root)
    count = root.obj("request_count", required=False)
    successful = count.count("avg") if count else None
    cond.successful, cond.requests = successful, successful
    return metric_json.summary_level(root, cond, _LATENCIES)


def _load_settings(root: Node) -> Conditions:
    cond = Conditions()
    config = root.obj("input_config", required=False)
    if config is None:
        return cond
    stimulus = config.value.get("perf_analyzer", {}).get("stimulus")
    if isinstance(stimulus, dict):
        node = Node(stimulus, root.source, ("input_config", "perf_analyzer", "stimulus"))
        cond.concurrency = node.num("concurrency")
        cond.request_rate = node.num("request_rate")
    else:  # older GenAI-Perf kept the load flags at the top of input_config
        cond.concurrency = config.num("concurrency")
        cond.request_rate = config.num("request_rate")
    return cond


def _meta(doc: dict[str, Any]) -> dict[str, str | int | float | bool | None]:
    config = doc.get("input_config") or {}
    meta: dict[str, str | int | float | bool | None] = {}
    models = config.get("model_names") or config.get("model")
    if isinstance(models, list) and models:
        meta["model"] = str(models[0])
    endpoint = config.get("endpoint")
    if isinstance(endpoint, dict):
        for key in ("type", "streaming", "service_kind"):
            if key in endpoint:
                meta[f"endpoint_{key}"] = endpoint[key]
    return meta


def _summary_csv(probe: Probe) -> Level:
    source = probe.source
    rows = metric_table.read(source)
    count = metric_table.value(rows, "Request Count")
    cond = Conditions()
    if count is not None:
        cond.successful = cond.requests = int(count)
    return metric_table.summary_level(source, rows, cond, _CSV_LATENCIES)


# --- perf_analyzer per-request export --------------------------------------------


def _parse_perf_analyzer(probe: Probe) -> ParsedReport:
    root = Node(probe.doc, probe.source)
    levels = []
    counted_frames = False
    models = RequestModels()
    for experiment in root.items("experiments"):
        level, frames = _experiment(experiment, models)
        levels.append(level)
        counted_frames = counted_frames or frames
    if not levels:
        raise root.error("expected at least one experiment, found an empty list", "experiments")
    warnings = []
    if counted_frames:
        warnings.append(
            "output tokens counted as streamed content chunks: the file has text, not token counts"
        )
    warnings.extend(models.warnings())
    meta: dict[str, str | int | float | bool | None] = models.meta()
    for key in ("service_kind", "endpoint"):
        if isinstance(root.raw(key), str):
            meta[key] = root.raw(key)
    return ParsedReport(
        filename=probe.source.filename,
        tool="perf_analyzer",
        tool_version=root.text("version"),
        format=NAME,
        variant="perf-analyzer-json",
        source="computed",
        levels=levels,
        meta=meta,
        warnings=warnings,
    )


def _experiment(experiment: Node, models: RequestModels) -> tuple[Level, bool]:
    settings = experiment.obj("experiment", required=False)
    cond = Conditions()
    if settings is not None:
        mode, value = settings.text("mode"), settings.num("value")
        if mode == "concurrency":
            cond.concurrency = value
        elif mode == "request_rate":
            cond.request_rate = value
    columns = RequestColumns(to_ms=1e-6)
    counted_frames = False
    for request in experiment.items("requests"):
        inputs = request.raw("request_inputs")
        if isinstance(inputs, dict):
            models.add(inputs.get("payload"))
        frames = _request(request, columns)
        counted_frames = counted_frames or frames
    if not len(columns):
        raise experiment.error("expected at least one request, found none", "requests")
    # perf_analyzer times are ns; the span is turned into seconds here.
    cond.duration_s = (columns.last_end - columns.first_start) / 1e9
    return columns.level(level_name(cond), cond), counted_frames


def _request(request: Node, columns: RequestColumns) -> bool:
    """Add one request; True when its tokens were counted from frames."""
    request.num("timestamp", required=True)
    # Kept as the int it is: ns since the epoch do not fit a float exactly.
    sent = request.raw("timestamp")
    times = request.get("response_timestamps")
    assert times is not None
    if not isinstance(times.value, list):
        raise times.error(f"expected a list of ns timestamps, found {describe(times.value)}")
    outputs = request.raw("response_outputs")
    if outputs is None:
        outputs = [None] * len(times.value)
    elif not isinstance(outputs, list) or len(outputs) != len(times.value):
        raise request.error(
            f"expected one entry per response timestamp ({len(times.value)})", "response_outputs"
        )
    kept: list[int | float] = []
    usage_tokens: float | None = None
    for i, (stamp, output) in enumerate(zip(times.value, outputs, strict=True)):
        if type(stamp) is not int and type(stamp) is not float:
            raise times.error(f"expected a ns timestamp, found {describe(stamp)}", i)
        has_content, tokens = _frame(output)
        if tokens is not None:
            usage_tokens = tokens
        if has_content:
            kept.append(stamp)
    if not kept:
        columns.add(True, math.nan, math.nan, math.nan, math.nan)
        columns.span(sent, sent)
        return False
    if kept[0] < sent:
        raise times.error(
            f"response at {kept[0]} ns is before the request was sent ({sent:.0f} ns): "
            "latency would be negative"
        )
    # Differences of the integer ns stamps: as float64 they would lose precision.
    columns.itl.extend([float(b - a) for a, b in itertools.pairwise(kept)])
    output_tokens = usage_tokens if usage_tokens is not None else float(len(kept))
    columns.add(False, float(kept[0] - sent), float(kept[-1] - sent), output_tokens, math.nan)
    columns.span(sent, kept[-1])
    return usage_tokens is None


def _frame(output: Any) -> tuple[bool, float | None]:
    """(carries generated text, completion tokens from a usage block) of one frame."""
    if not isinstance(output, dict) or "response" not in output:
        return True, None  # not an OpenAI stream: every response is output
    text = output["response"]
    if not isinstance(text, str):
        return bool(text), None
    text = text.strip()
    if text.startswith("data:"):
        text = text[5:].strip()
    if not text or text == "[DONE]":
        return False, None
    try:
        chunk = orjson.loads(text)
    except orjson.JSONDecodeError:
        return True, None
    if not isinstance(chunk, dict):
        return True, None
    usage = chunk.get("usage")
    tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
    tokens = float(tokens) if isinstance(tokens, int | float) else None
    for choice in chunk.get("choices") or ():
        if not isinstance(choice, dict):
            continue
        delta = choice.get("delta") or choice.get("message") or {}
        content = (
            (delta.get("content") or delta.get("reasoning_content"))
            if isinstance(delta, dict)
            else None
        )
        if content or choice.get("text"):
            return True, tokens
    return False, tokens
