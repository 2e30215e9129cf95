"""One day's RunSummary fields from two scrapes of an engine's metrics.

Counters and histogram buckets are differenced series by series (a reset
counts from the restart), then added up across series (model names, engine
ranks). Latency percentiles come from the bucket increases by PromQL's
`histogram_quantile`, in milliseconds. What the engine does not expose stays
None, and `details["missing"]` says so; `details["metrics"]` names the metric
each number was read from, so a renamed metric shows which name was found.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ledger.metrics_import.deltas import (
    Resets,
    counter_increase,
    histogram_increase,
    merge_histograms,
)
from ledger.metrics_import.engines import EngineMetrics
from ledger.metrics_import.exposition import Labels, Scrape
from ledger.metrics_import.histograms import Histogram, histogram_quantile

QUANTILES = {"p50": 0.5, "p95": 0.95, "p99": 0.99}


@dataclass
class ScrapeSummary:
    """`fields` are record_run_summary's keyword arguments (details among them)."""

    fields: dict[str, Any] = field(default_factory=dict)

    @property
    def details(self) -> dict[str, Any]:
        return self.fields["details"]


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 3)


def _ratio(part: float, whole: float) -> float | None:
    return round(part / whole, 6) if whole > 0 else None


class _Reader:
    def __init__(self, before: Scrape, after: Scrape) -> None:
        self.before, self.after = before, after
        self.resets = Resets()
        self.used: dict[str, str] = {}

    def _first(self, names: tuple[str, ...], present: Mapping[str, Any]) -> str | None:
        return next((name for name in names if name in present), None)

    def counter_series(self, role: str, names: tuple[str, ...]) -> dict[Labels, float] | None:
        name = self._first(names, self.after.counters)
        if name is None:
            return None
        self.used[role] = name
        return counter_increase(
            name, self.before.counters.get(name), self.after.counters[name], self.resets
        )

    def counter(self, role: str, names: tuple[str, ...]) -> float | None:
        series = self.counter_series(role, names)
        return None if series is None else sum(series.values())

    def histogram(self, role: str, names: tuple[str, ...]) -> Histogram | None:
        name = self._first(names, self.after.histograms)
        if name is None:
            return None
        self.used[role] = name
        increase = histogram_increase(
            name, self.before.histograms.get(name), self.after.histograms[name], self.resets
        )
        return merge_histograms(increase.values())

    def gauge(self, role: str, names: tuple[str, ...]) -> float | None:
        """The later scrape's value (the highest across series): a gauge has no increase."""
        name = self._first(names, self.after.gauges)
        if name is None or not self.after.gauges[name]:
            return None
        self.used[role] = name
        return max(self.after.gauges[name].values())


def _by_label(series: dict[Labels, float], label: str) -> dict[str, float]:
    split: dict[str, float] = defaultdict(float)
    for labels, value in series.items():
        split[dict(labels).get(label, "")] += value
    return dict(split)


def _count(value: float) -> int:
    return round(value)


def summarize(engine: EngineMetrics, before: Scrape, after: Scrape) -> ScrapeSummary:
    """The increase from `before` to `after` as RunSummary fields."""
    read = _Reader(before, after)
    fields: dict[str, Any] = {}
    details: dict[str, Any] = {"engine": engine.name}

    requests: float | None = None
    error_counts: dict[str, int] = {}
    if engine.http_requests and (
        http := read.counter_series("http_requests", (engine.http_requests,))
    ):
        generation = {
            labels: value
            for labels, value in http.items()
            if dict(labels).get(engine.http_handler_label) in engine.http_handlers
        }
        by_status = _by_label(generation, engine.http_status_label)
        requests = sum(by_status.values())
        error_counts = {
            status: _count(count)
            for status, count in sorted(by_status.items())
            if status[:1] in ("4", "5") and count > 0
        }
        fields["rate_4xx"] = _ratio(
            sum(v for s, v in by_status.items() if s.startswith("4")), requests
        )
        fields["rate_5xx"] = _ratio(
            sum(v for s, v in by_status.items() if s.startswith("5")), requests
        )
    if engine.finished and (finished := read.counter_series("finished", (engine.finished,))):
        reasons = _by_label(finished, engine.finished_label)
        total = sum(reasons.values())
        if requests is None:
            requests = total
        truncated = sum(reasons.get(r, 0.0) for r in engine.truncated_reasons)
        fields["truncation_rate"] = _ratio(truncated, total)
        details["finished"] = {reason: _count(count) for reason, count in sorted(reasons.items())}
        details["aborted"] = _count(sum(reasons.get(r, 0.0) for r in engine.aborted_reasons))
    if requests is None and engine.requests:
        requests = read.counter("requests", engine.requests)
    if engine.aborted and (aborted := read.counter("aborted", engine.aborted)) is not None:
        details["aborted"] = _count(aborted)
    if engine.failures and (failures := read.counter_series("failures", (engine.failures,))):
        error_counts = {
            kind or "unknown": _count(count)
            for kind, count in sorted(_by_label(failures, engine.failure_label).items())
            if count > 0
        }
    fields["requests"] = None if requests is None else _count(requests)
    fields["error_counts"] = error_counts

    for metric, names in (("ttft", engine.ttft), ("tpot", engine.tpot), ("e2e", engine.e2e)):
        histogram = read.histogram(metric, names) if names else None
        for percentile, q in QUANTILES.items():
            value = histogram_quantile(q, histogram.buckets) if histogram else None
            fields[f"{metric}_{percentile}_ms"] = _ms(value)
        if histogram is not None:
            details[f"{metric}_observations"] = _count(histogram.count)

    prompt = read.counter("prompt_tokens", engine.prompt_tokens) if engine.prompt_tokens else None
    generated = (
        read.counter("generation_tokens", engine.generation_tokens)
        if engine.generation_tokens
        else None
    )
    if prompt is None and engine.prompt_tokens_histogram:
        histogram = read.histogram("prompt_tokens", engine.prompt_tokens_histogram)
        prompt = histogram.sum if histogram else None
    if generated is None and engine.generation_tokens_histogram:
        histogram = read.histogram("generation_tokens", engine.generation_tokens_histogram)
        generated = histogram.sum if histogram else None
    if prompt is not None:
        details["prompt_tokens"] = _count(prompt)
    if generated is not None:
        details["generation_tokens"] = _count(generated)

    hits = read.counter("cache_hits", engine.cache_hits) if engine.cache_hits else None
    queries = read.counter("cache_queries", engine.cache_queries) if engine.cache_queries else None
    cached = read.counter("cached_tokens", engine.cached_tokens) if engine.cached_tokens else None
    if hits is not None and queries is not None:
        fields["cache_hit_rate"] = _ratio(hits, queries)
    elif cached is not None and prompt:
        fields["cache_hit_rate"] = _ratio(min(cached, prompt), prompt)
    elif engine.cache_hit_gauge and (gauge := read.gauge("cache_hit_rate", engine.cache_hit_gauge)):
        fields["cache_hit_rate"] = round(min(max(gauge, 0.0), 1.0), 6)
    if engine.kv_cache_usage and (usage := read.gauge("kv_cache_usage", engine.kv_cache_usage)):
        details["kv_cache_usage"] = round(usage, 6)
    if engine.decode_seconds:
        seconds_name, tokens_name = engine.decode_seconds
        seconds = read.counter("decode_seconds", (seconds_name,))
        tokens = read.counter("decode_tokens", (tokens_name,))
        if seconds is not None and tokens:
            details["tpot_mean_ms"] = round(seconds / tokens * 1000, 3)
    if engine.preemptions and (preempted := read.counter("preemptions", engine.preemptions)):
        details["preemptions"] = _count(preempted)

    details["metrics"] = dict(sorted(read.used.items()))
    details["counter_resets"] = read.resets.series
    details["missing"] = sorted(
        name
        for name in ("requests", "ttft_p95_ms", "tpot_p95_ms", "e2e_p95_ms")
        if fields.get(name) is None
    )
    fields["details"] = details
    return ScrapeSummary(fields)
