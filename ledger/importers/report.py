"""The shape every importer returns, and its JSON form.

All latencies are milliseconds, all throughputs per second, token counts are
tokens. A number the file does not give is None, never 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal, NotRequired, TypedDict

import numpy as np

from ledger.metrics_import.peaks import Peaks

SourceKind = Literal["computed", "tool"]
LATENCY_METRICS = ("ttft", "tpot", "itl", "e2e")


@dataclass
class LatencyStats:
    """One latency metric in milliseconds."""

    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    max: float | None = None

    def is_empty(self) -> bool:
        return all(v is None for v in vars(self).values())


@dataclass
class TokenStats:
    mean: float | None = None
    p50: float | None = None
    p90: float | None = None


@dataclass
class Conditions:
    """The load a level was measured under, and how many requests it counted.

    `request_rate` is requests/s. A rate the tool calls unlimited ("inf": every
    request sent at once, held back only by `concurrency`) is None with
    `request_rate_unlimited` True, so no infinity reaches JSON.
    """

    concurrency: float | None = None
    request_rate: float | None = None
    request_rate_unlimited: bool = False
    requests: int | None = None
    successful: int | None = None
    errored: int | None = None
    # Requests cut off when the benchmark stopped (GuideLLM): neither a success nor an error.
    incomplete: int | None = None
    error_rate: float | None = None
    duration_s: float | None = None
    prompt_tokens: TokenStats = field(default_factory=TokenStats)
    output_tokens: TokenStats = field(default_factory=TokenStats)

    def count(
        self, successful: int | None, errored: int | None, incomplete: int | None = None
    ) -> None:
        """Set the counts, their total and the error rate."""
        self.successful = successful
        self.errored = errored
        self.incomplete = incomplete
        if successful is not None:
            total = successful + (errored or 0) + (self.incomplete or 0)
            self.requests = total
            if errored is not None and total:
                self.error_rate = errored / total
            elif errored is not None:
                self.error_rate = 0.0


@dataclass
class Throughput:
    requests_per_s: float | None = None
    output_tokens_per_s: float | None = None
    total_tokens_per_s: float | None = None


@dataclass
class RequestArrays:
    """Per-request numbers, one entry per request (failed ones included).

    Latencies are ms, NaN where a request has none (it failed, or a TPOT with
    one output token). `error` is True for a failed request. An array the file
    cannot provide is None (SGLang, for instance, has TTFTs but no end-to-end
    latencies per request).
    """

    error: np.ndarray
    ttft_ms: np.ndarray | None = None
    tpot_ms: np.ndarray | None = None
    e2e_ms: np.ndarray | None = None
    output_tokens: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.error)


@dataclass
class Level:
    """One load level: a benchmark of a sweep, a run, or the whole file."""

    name: str
    source: SourceKind
    conditions: Conditions = field(default_factory=Conditions)
    ttft: LatencyStats = field(default_factory=LatencyStats)
    tpot: LatencyStats = field(default_factory=LatencyStats)
    itl: LatencyStats = field(default_factory=LatencyStats)
    e2e: LatencyStats = field(default_factory=LatencyStats)
    throughput: Throughput = field(default_factory=Throughput)
    requests: RequestArrays | None = None


@dataclass
class ParsedReport:
    """What a load-test file says, normalised.

    `format` is the importer (a key of `FORMATS`), `variant` which of its files
    it read. `source` is "computed" when every level's percentiles were computed
    here from per-request data, "tool" otherwise (the tool's own summary).
    """

    filename: str
    tool: str
    format: str
    variant: str
    source: SourceKind
    levels: list[Level]
    tool_version: str | None = None
    meta: dict[str, str | int | float | bool | None] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    # GPU memory or KV-cache peaks the tool itself recorded (its GPU telemetry), by
    # the report column they fill; only where the file really carries one.
    peaks: Peaks = field(default_factory=dict)

    def to_json(self, *, include_requests: bool = False, cdf_max_points: int = 200) -> ReportJSON:
        """A JSON-safe dict: plain floats, no NaN or infinity, no numpy types.

        Each level carries `ttft_cdf` (at most `cdf_max_points` [ms, fraction]
        pairs) when it has per-request TTFTs. The per-request arrays themselves
        are large; they are included only when asked.
        """
        return {
            "schema": 1,
            "filename": self.filename,
            "tool": self.tool,
            "tool_version": self.tool_version,
            "format": self.format,
            "variant": self.variant,
            "source": self.source,
            "meta": {k: _scalar(v) for k, v in self.meta.items()},
            "warnings": list(self.warnings),
            "levels": [
                _level_json(level, include_requests=include_requests, cdf_max=cdf_max_points)
                for level in self.levels
            ],
        }


class ReportJSON(TypedDict):
    schema: int
    filename: str
    tool: str
    tool_version: str | None
    format: str
    variant: str
    source: SourceKind
    meta: dict[str, Any]
    warnings: list[str]
    levels: list[dict[str, Any]]
    # What wrote a file the ledger made itself (a drill's requests), when it did.
    origin: NotRequired[dict[str, Any]]
    # Where the report's peak columns came from (ledger.metrics_import.peaks), when it has any.
    peaks: NotRequired[Peaks]


def cdf_points(values: Any, max_points: int = 200) -> list[tuple[float, float]]:
    """The empirical CDF of `values` as (value, fraction ≤ value) pairs.

    NaNs are dropped. With more values than `max_points`, points are taken at
    evenly spaced ranks, always keeping the smallest and the largest, so the
    curve keeps its tails.
    """
    if max_points < 2:
        raise ValueError("max_points must be at least 2")
    arr = np.asarray(values, dtype=np.float64)
    arr = np.sort(arr[~np.isnan(arr)])
    n = len(arr)
    if n == 0:
        return []
    ranks = np.arange(n) if n <= max_points else np.linspace(0, n - 1, max_points).round()
    idx = np.unique(ranks.astype(np.int64))
    return [(float(arr[i]), float((i + 1) / n)) for i in idx]


def _level_json(level: Level, *, include_requests: bool, cdf_max: int) -> dict[str, Any]:
    c = level.conditions
    out: dict[str, Any] = {
        "name": level.name,
        "source": level.source,
        "conditions": {
            "concurrency": _num(c.concurrency),
            "request_rate": _num(c.request_rate),
            "request_rate_unlimited": c.request_rate_unlimited,
            "requests": c.requests,
            "successful": c.successful,
            "errored": c.errored,
            "incomplete": c.incomplete,
            "error_rate": _num(c.error_rate),
            "duration_s": _num(c.duration_s),
            "prompt_tokens": _nums(vars(c.prompt_tokens)),
            "output_tokens": _nums(vars(c.output_tokens)),
        },
        "latency_ms": {name: _nums(vars(getattr(level, name))) for name in LATENCY_METRICS},
        "throughput": _nums(vars(level.throughput)),
        "ttft_cdf": None,
    }
    req = level.requests
    if req is not None and req.ttft_ms is not None:
        ok = req.ttft_ms[~req.error]
        out["ttft_cdf"] = [[x, f] for x, f in cdf_points(ok, cdf_max)]
    if include_requests:
        out["requests"] = None if req is None else _requests_json(req)
    return out


def _requests_json(req: RequestArrays) -> dict[str, list[Any] | None]:
    def floats(arr: np.ndarray | None) -> list[float | None] | None:
        if arr is None:
            return None
        return [None if math.isnan(x) else x for x in arr.tolist()]

    return {
        "ttft_ms": floats(req.ttft_ms),
        "tpot_ms": floats(req.tpot_ms),
        "e2e_ms": floats(req.e2e_ms),
        "output_tokens": floats(req.output_tokens),
        "error": [bool(x) for x in req.error.tolist()],
    }


def _num(value: float | None) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _nums(values: dict[str, float | None]) -> dict[str, float | None]:
    return {k: _num(v) for k, v in values.items()}


def _scalar(value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        return _num(float(value))
    return str(value)
