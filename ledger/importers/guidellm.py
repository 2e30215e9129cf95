"""GuideLLM reports: `benchmarks.json` and `benchmarks.csv`.

One benchmark per load level (a sweep writes several in one file). A
benchmark's own level is `benchmarks[i].config.strategy` (`type_` concurrent
with `streams`, constant/poisson with `rate`, synchronous, throughput);
`config.profile` repeats the whole sweep and is not used.

JSON: per-request records are under `requests.{successful,errored,incomplete}`
with `time_to_first_token_ms` in ms but `request_latency` in seconds. When all
records are there, percentiles are computed from them (GuideLLM's own are not
numpy's linear interpolation and differ by a few percent); when GuideLLM kept
only a sample, its summary (`metrics.<name>.successful`) is used. Incomplete
requests (cut off when the benchmark stopped) are counted apart, not as errors.

GuideLLM's names do not match ours: its `inter_token_latency_ms` is our TPOT
(decode time per token after the first), and its `time_per_output_token_ms`
includes the TTFT; it records no per-chunk gaps, so ITL is left empty.

CSV: three header rows (group, name, statistic); columns depend on the data
(errored columns appear only when a request errored), so they are looked up
by header. Percentile cells are lists of min, p0.1, p1, p5, p10, p25, p75,
p90, p95, p99, p99.9 (no p50: that is the Median column, and no max). The CSV
is a summary: the numbers are GuideLLM's.
"""

from __future__ import annotations

import csv
import math
from typing import Any

import orjson

from .fields import Node
from .report import Conditions, LatencyStats, Level, ParsedReport, Throughput, TokenStats
from .source import Probe
from .stats import RequestColumns

NAME = "guidellm"
EXPECTED = "a GuideLLM benchmarks.json (a `benchmarks` list) or benchmarks.csv"

# What the lists in the CSV's Percentiles cells hold, in order (checked against the JSON).
_CSV_PERCENTILES = ("min", "p001", "p01", "p05", "p10", "p25", "p75", "p90", "p95", "p99", "p999")


def detect(probe: Probe) -> str | None:
    doc = probe.doc
    if probe.kind == "json" and isinstance(doc, dict) and isinstance(doc.get("benchmarks"), list):
        metadata = doc.get("metadata")
        if isinstance(metadata, dict) and "guidellm_version" in metadata:
            return "benchmarks-json"
        first = doc["benchmarks"][0] if doc["benchmarks"] else None
        if isinstance(first, dict) and "metrics" in first and "requests" in first:
            return "benchmarks-json"
    if probe.kind == "csv" and probe.header and probe.header[0] == "Run Info":
        return "benchmarks-csv"
    return None


def parse(probe: Probe, variant: str) -> ParsedReport:
    if variant == "benchmarks-csv":
        return _parse_csv(probe)
    root = Node(probe.doc, probe.source)
    warnings: list[str] = []
    levels = [_benchmark(b, warnings) for b in root.items("benchmarks")]
    if not levels:
        raise root.error("expected at least one benchmark, found an empty list", "benchmarks")
    metadata = root.obj("metadata", required=False)
    return ParsedReport(
        filename=probe.source.filename,
        tool="guidellm",
        tool_version=metadata.text("guidellm_version") if metadata else None,
        format=NAME,
        variant=variant,
        source="computed" if all(lv.source == "computed" for lv in levels) else "tool",
        levels=levels,
        meta=_meta(root),
        warnings=warnings,
    )


def _meta(root: Node) -> dict[str, str | int | float | bool | None]:
    backend = root.value.get("config", {}).get("spec", {}).get("backend", {})
    if not isinstance(backend, dict):
        return {}
    return {k: backend[k] for k in ("model", "target", "request_format") if k in backend}


def strategy_conditions(kind: str, value: float | None) -> Conditions:
    cond = Conditions()
    if kind == "synchronous":
        cond.concurrency = 1
    elif kind == "concurrent":
        cond.concurrency = value
    elif kind == "throughput":
        cond.request_rate_unlimited = True
        cond.concurrency = value
    else:  # constant, poisson: a request rate
        cond.request_rate = value
    return cond


def strategy_name(kind: str, value: float | None) -> str:
    """GuideLLM's own label, as its CSV writes it: concurrent@2, constant@0.20."""
    if value is None or kind == "throughput":
        return kind
    if kind == "concurrent":
        return f"concurrent@{value:g}"
    return f"{kind}@{value:.2f}"


def _benchmark(bench: Node, warnings: list[str]) -> Level:
    config = bench.obj("config", required=False) or bench.obj("args")
    assert config is not None
    strategy = config.obj("strategy")
    assert strategy is not None
    kind = strategy.text("type_", required=True) or ""
    if kind == "concurrent":
        value = strategy.num("streams", required=not strategy.has("max_concurrency"))
        value = value if value is not None else strategy.num("max_concurrency")
    elif kind == "throughput":
        value = strategy.num("max_concurrency")
    elif kind == "synchronous":
        value = None
    else:
        value = strategy.num("rate", required=True)
    cond = strategy_conditions(kind, value)
    cond.duration_s = bench.num("duration")
    name = strategy_name(kind, value)

    metrics = bench.obj("metrics")
    assert metrics is not None
    throughput = Throughput(
        requests_per_s=_mean(metrics, "requests_per_second"),
        output_tokens_per_s=_mean(metrics, "output_tokens_per_second"),
        total_tokens_per_s=_mean(metrics, "tokens_per_second"),
    )
    totals = metrics.obj("request_totals")
    assert totals is not None
    counts = {k: totals.count(k, required=True) for k in ("successful", "errored", "incomplete")}
    for item in bench.items("warnings", required=False):
        note = item.value.get("note") if isinstance(item.value, dict) else item.value
        warnings.append(f"GuideLLM warned about {name}: {note}")

    requests = bench.obj("requests", required=False)
    records = {k: requests.items(k, required=False) if requests else [] for k in counts}
    complete = all(len(records[k]) == counts[k] for k in ("successful", "errored"))
    if complete:
        columns = RequestColumns(to_ms=1.0)
        for key in ("successful", "errored"):
            for record in records[key]:
                _add(columns, record, failed=key == "errored")
        return columns.level(name, cond, throughput=throughput, incomplete=counts["incomplete"])

    warnings.append(
        f"{name}: GuideLLM kept {len(records['successful'])} of {counts['successful']} "
        "successful requests; its own percentiles are used"
    )
    cond.count(counts["successful"], counts["errored"], counts["incomplete"])
    cond.prompt_tokens = _tokens(metrics, "prompt_token_count")
    cond.output_tokens = _tokens(metrics, "output_token_count")
    return Level(
        name=name,
        source="tool",
        conditions=cond,
        ttft=_latency(metrics, "time_to_first_token_ms", 1.0),
        tpot=_latency(metrics, "inter_token_latency_ms", 1.0),
        e2e=_latency(metrics, "request_latency", 1000.0),
        throughput=throughput,
    )


def _add(columns: RequestColumns, record: Node, *, failed: bool) -> None:
    if failed:
        e2e, ttft = record.num("request_latency"), record.num("time_to_first_token_ms")
    else:
        e2e = record.latency("request_latency", required=True)
        ttft = record.latency("time_to_first_token_ms")
    columns.add(
        failed,
        _or_nan(ttft),
        math.nan if e2e is None else e2e * 1000.0,
        _or_nan(record.num("output_tokens")),
        _or_nan(record.num("prompt_tokens")),
    )


def _or_nan(value: float | None) -> float:
    return math.nan if value is None else value


def _successful(metrics: Node, name: str) -> Node | None:
    metric = metrics.obj(name, required=False)
    return metric.obj("successful", required=False) if metric else None


def _mean(metrics: Node, name: str) -> float | None:
    stats = _successful(metrics, name)
    return stats.num("mean") if stats else None


def _latency(metrics: Node, name: str, scale: float) -> LatencyStats:
    stats = _successful(metrics, name)
    if stats is None:
        return LatencyStats()
    pct = stats.obj("percentiles", required=False)

    def p(key: str) -> float | None:
        return pct.latency(key, scale=scale) if pct else None

    return LatencyStats(
        mean=stats.latency("mean", scale=scale),
        p50=p("p50"),
        p90=p("p90"),
        p95=p("p95"),
        p99=p("p99"),
        max=stats.latency("max", scale=scale),
    )


def _tokens(metrics: Node, name: str) -> TokenStats:
    stats = _successful(metrics, name)
    if stats is None:
        return TokenStats()
    pct = stats.obj("percentiles", required=False)
    return TokenStats(
        mean=stats.num("mean"),
        p50=pct.num("p50") if pct else None,
        p90=pct.num("p90") if pct else None,
    )


# --- CSV ---------------------------------------------------------------------


class _Row:
    """One benchmark row of the CSV, its cells found by their three headers."""

    def __init__(
        self, probe: Probe, columns: dict[tuple[str, str, str], int], cells: list[str], line: int
    ) -> None:
        self.probe = probe
        self.columns = columns
        self.cells = cells
        self.line = line

    def error(self, message: str) -> Exception:
        return self.probe.source.error(f"line {self.line}", message)

    def cell(self, group: str, name: str, stat: str = "", *, required: bool = True) -> str | None:
        index = self.columns.get((group, name, stat))
        if index is None:
            if required:
                label = " / ".join(p for p in (group, name, stat) if p)
                raise self.probe.source.error("header (lines 1-3)", f"missing column {label!r}")
            return None
        return self.cells[index] if index < len(self.cells) else ""

    def num(self, group: str, name: str, stat: str = "", *, required: bool = False) -> float | None:
        text = self.cell(group, name, stat, required=required)
        if not text:
            if required:
                raise self.error(f"{group} / {name}: expected a number, found an empty cell")
            return None
        try:
            return float(text)
        except ValueError:
            raise self.error(
                f"{group} / {name} {stat}: expected a number, found {text!r}"
            ) from None

    def latency(self, group: str) -> LatencyStats:
        found = [(n, s) for (g, n, s) in self.columns if g == group and n.startswith("Successful")]
        if not found:
            return LatencyStats()
        name = found[0][0]
        scale = 1000.0 if name.endswith("Sec") else 1.0
        mean = self.num(group, name, "Mean")
        median = self.num(group, name, "Median")
        pct = self._percentiles(group, name)
        stats = LatencyStats(
            mean=None if mean is None else mean * scale,
            p50=None if median is None else median * scale,
            p90=_scaled(pct.get("p90"), scale),
            p95=_scaled(pct.get("p95"), scale),
            p99=_scaled(pct.get("p99"), scale),
        )
        for key, value in vars(stats).items():
            if value is not None and not value >= 0:
                raise self.error(f"{group} {key}: latency is {value!r}: expected at least 0")
        return stats

    def tokens(self, name: str) -> TokenStats:
        pct = self._percentiles("Token Metrics", name)
        return TokenStats(
            mean=self.num("Token Metrics", name, "Mean"),
            p50=self.num("Token Metrics", name, "Median"),
            p90=pct.get("p90"),
        )

    def _percentiles(self, group: str, name: str) -> dict[str, float]:
        text = self.cell(group, name, "Percentiles", required=False)
        if not text:
            return {}
        try:
            values: Any = orjson.loads(text)
        except orjson.JSONDecodeError:
            values = None
        if not isinstance(values, list) or len(values) != len(_CSV_PERCENTILES):
            raise self.error(
                f"{group} / {name} percentiles: expected a list of {len(_CSV_PERCENTILES)} "
                f"numbers, found {text[:60]!r}"
            )
        return dict(zip(_CSV_PERCENTILES, values, strict=True))


def _scaled(value: float | None, scale: float) -> float | None:
    return None if value is None else value * scale


def _parse_csv(probe: Probe) -> ParsedReport:
    reader = csv.reader(probe.source.text_lines())
    headers = [next(reader, None) for _ in range(3)]
    if any(h is None for h in headers):
        raise probe.source.error(None, "expected three header rows and a row per benchmark")
    columns: dict[tuple[str, str, str], int] = {}
    for i, key in enumerate(zip(*headers, strict=False)):
        columns.setdefault(tuple(cell.strip() for cell in key), i)
    levels: list[Level] = []
    version = None
    for cells in reader:
        if not any(c.strip() for c in cells):
            continue
        row = _Row(probe, columns, cells, reader.line_num)
        if version is None:
            version = _csv_version(row)
        levels.append(_csv_level(row))
    if not levels:
        raise probe.source.error(None, "the CSV has headers but no benchmark row")
    return ParsedReport(
        filename=probe.source.filename,
        tool="guidellm",
        tool_version=version,
        format=NAME,
        variant="benchmarks-csv",
        source="tool",
        levels=levels,
    )


def _csv_version(row: _Row) -> str | None:
    text = row.cell("Runtime Info", "Metadata", required=False)
    try:
        metadata = orjson.loads(text) if text else None
    except orjson.JSONDecodeError:
        return None
    version = metadata.get("guidellm_version") if isinstance(metadata, dict) else None
    return version if isinstance(version, str) else None


def _csv_level(row: _Row) -> Level:
    strategy = row.cell("Benchmark", "Strategy") or ""
    kind, _, value_text = strategy.partition("@")
    try:
        value = float(value_text) if value_text else None
    except ValueError:
        raise row.error(
            f"Benchmark / Strategy: expected e.g. constant@0.50, found {strategy!r}"
        ) from None
    cond = strategy_conditions(kind, value)
    cond.duration_s = row.num("Timings", "Duration", "Sec")
    counts = [row.num("Request Counts", k) for k in ("Successful", "Errored", "Incomplete")]
    successful, errored, incomplete = (None if c is None else int(c) for c in counts)
    cond.count(successful, errored, incomplete)
    cond.prompt_tokens = row.tokens("Successful Input Tokens")
    cond.output_tokens = row.tokens("Successful Output Tokens")
    return Level(
        name=strategy,
        source="tool",
        conditions=cond,
        ttft=row.latency("Time to First Token"),
        tpot=row.latency("Inter Token Latency"),
        e2e=row.latency("Request Latency"),
        throughput=Throughput(
            requests_per_s=row.num("Server Throughput", "Successful Requests/Sec", "Mean"),
            output_tokens_per_s=row.num("Token Throughput", "Successful Output Tokens/Sec", "Mean"),
            total_tokens_per_s=row.num("Token Throughput", "Successful Total Tokens/Sec", "Mean"),
        ),
    )
