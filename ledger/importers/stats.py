"""Percentiles from per-request data, and the collector importers stream into.

Percentiles are `lib.percentiles`: numpy's default (linear interpolation), the
method vLLM, SGLang, AIPerf, GenAI-Perf and inference-perf use, so a
recomputation from a file's own per-request data reproduces the tool's
numbers. They are computed in the file's unit and only then scaled to ms, in
that order, as vLLM does: that keeps them equal to the last bit.
"""

from __future__ import annotations

import math
from array import array

import numpy as np

from lib.percentiles import percentiles

from .report import Conditions, LatencyStats, Level, RequestArrays, Throughput, TokenStats


def latency_stats(values: np.ndarray, scale: float = 1.0) -> LatencyStats:
    """mean/p50/p90/p95/p99/max of the non-NaN values, times `scale`."""
    nan = np.isnan(values)
    if nan.any():
        values = values[~nan]
    if not len(values):
        return LatencyStats()
    p = percentiles(values, scale)
    return LatencyStats(
        mean=float(np.mean(values) * scale),
        p50=p.p50,
        p90=p.p90,
        p95=p.p95,
        p99=p.p99,
        max=float(np.max(values) * scale),
    )


def token_stats(values: np.ndarray) -> TokenStats:
    values = values[~np.isnan(values)]
    if not len(values):
        return TokenStats()
    p = percentiles(values)
    return TokenStats(mean=float(np.mean(values)), p50=p.p50, p90=p.p90)


def tpot(e2e: np.ndarray, ttft: np.ndarray, output_tokens: np.ndarray) -> np.ndarray:
    """(e2e - ttft) / (output_tokens - 1); NaN where there is one token or fewer."""
    out = np.full(len(e2e), np.nan)
    many = output_tokens > 1
    out[many] = (e2e[many] - ttft[many]) / (output_tokens[many] - 1)
    return out


class RequestColumns:
    """Per-request numbers gathered while a file streams past.

    Latencies stay in the file's own unit until the end (see the module
    docstring); `to_ms` is the factor to milliseconds. Typed arrays, not a
    dict per request, keep 100,000 requests in a few megabytes.
    """

    def __init__(self, to_ms: float) -> None:
        self.to_ms = to_ms
        self.error = array("b")
        self.ttft = array("d")
        self.e2e = array("d")
        self.tpot = array("d")
        self.output_tokens = array("d")
        self.input_tokens = array("d")
        # Gaps between streamed chunks, successful requests only.
        self.itl = array("d")
        self.first_start = math.inf
        self.last_end = -math.inf

    def __len__(self) -> int:
        return len(self.error)

    def add(
        self,
        failed: bool,
        ttft: float,
        e2e: float,
        output_tokens: float,
        input_tokens: float,
        tpot: float = math.nan,
    ) -> None:
        """One request; NaN for what it does not have. `tpot` only when the
        file states it, otherwise it is computed from e2e and ttft."""
        self.error.append(failed)
        self.ttft.append(ttft)
        self.e2e.append(e2e)
        self.tpot.append(tpot)
        self.output_tokens.append(output_tokens)
        self.input_tokens.append(input_tokens)

    def span(self, start: float, end: float) -> None:
        """Widen the wall-clock window the requests ran in (seconds)."""
        if start < self.first_start:
            self.first_start = start
        if end > self.last_end:
            self.last_end = end

    def level(
        self,
        name: str,
        conditions: Conditions,
        *,
        throughput: Throughput | None = None,
        incomplete: int | None = None,
    ) -> Level:
        if conditions.duration_s is None and self.last_end > self.first_start:
            conditions.duration_s = self.last_end - self.first_start
        # Views of the typed arrays, not copies; they keep them alive and frozen.
        return computed_level(
            name,
            conditions,
            to_ms=self.to_ms,
            failed=np.frombuffer(self.error, dtype=np.int8).astype(bool),
            ttft=_view(self.ttft),
            e2e=_view(self.e2e),
            output_tokens=_view(self.output_tokens),
            input_tokens=_view(self.input_tokens),
            given_tpot=_view(self.tpot),
            itl=_view(self.itl),
            throughput=throughput,
            incomplete=incomplete,
        )


def _view(values: array[float]) -> np.ndarray:
    return np.frombuffer(values, dtype=np.float64) if len(values) else np.empty(0)


def computed_level(
    name: str,
    conditions: Conditions,
    *,
    to_ms: float,
    failed: np.ndarray,
    ttft: np.ndarray,
    e2e: np.ndarray,
    output_tokens: np.ndarray,
    input_tokens: np.ndarray,
    itl: np.ndarray,
    given_tpot: np.ndarray | None = None,
    throughput: Throughput | None = None,
    incomplete: int | None = None,
) -> Level:
    """The level a set of requests makes: counts, percentiles, throughput.

    Arrays are one entry per request, latencies in the file's unit (`to_ms`
    converts), NaN where a request lacks a number; `itl` holds the chunk gaps
    of the successful requests. Failed requests are counted as errors and kept
    out of every percentile. Throughput is computed over `conditions.duration_s`
    unless the tool's is given.
    """
    ok = ~failed
    per_token = tpot(e2e, ttft, output_tokens)
    if given_tpot is not None:
        per_token = np.where(np.isnan(given_tpot), per_token, given_tpot)
    for arr in (ttft, e2e, per_token):
        arr[failed] = np.nan

    successful = int(ok.sum())
    conditions.count(successful, int(failed.sum()), incomplete)
    conditions.prompt_tokens = token_stats(input_tokens[ok])
    conditions.output_tokens = token_stats(output_tokens[ok])

    if throughput is None:
        throughput = Throughput()
        duration = conditions.duration_s
        if duration:
            out_sum = float(np.nansum(output_tokens[ok]))
            throughput.requests_per_s = successful / duration
            if not np.isnan(output_tokens[ok]).all():
                throughput.output_tokens_per_s = out_sum / duration
            if not np.isnan(input_tokens[ok]).all():
                in_sum = float(np.nansum(input_tokens[ok]))
                throughput.total_tokens_per_s = (in_sum + out_sum) / duration

    def ms(arr: np.ndarray) -> np.ndarray | None:
        return None if np.isnan(arr).all() else arr * to_ms

    return Level(
        name=name,
        source="computed",
        conditions=conditions,
        ttft=latency_stats(ttft[ok], to_ms),
        tpot=latency_stats(per_token[ok], to_ms),
        itl=latency_stats(itl, to_ms),
        e2e=latency_stats(e2e[ok], to_ms),
        throughput=throughput,
        requests=RequestArrays(
            error=failed,
            ttft_ms=ms(ttft),
            tpot_ms=ms(per_token),
            e2e_ms=ms(e2e),
            output_tokens=None if np.isnan(output_tokens).all() else output_tokens,
        ),
    )


def level_name(conditions: Conditions) -> str:
    """A short label for a level from its load: "concurrency 2", "rate 0.5/s"."""
    parts = []
    if conditions.request_rate is not None:
        parts.append(f"rate {conditions.request_rate:g}/s")
    elif conditions.request_rate_unlimited and conditions.concurrency is None:
        parts.append("rate unlimited")
    if conditions.concurrency is not None:
        parts.append(f"concurrency {conditions.concurrency:g}")
    return ", ".join(parts) or "run"
