"""Percentiles and run aggregates over replay results.

Percentiles are `lib.percentiles`, numpy's default (linear interpolation), the
same as ``vllm bench serve``, so a replay's p95 and a load-test report's p95
mean the same thing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, TypedDict

import numpy as np

from lib.percentiles import percentiles

if TYPE_CHECKING:
    from replay.client import ReplayResult


class Summary(TypedDict):
    count: int
    mean: float | None
    min: float | None
    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    max: float | None


class RunAggregate(TypedDict):
    requests: int
    ok: int
    errors: int
    error_codes: dict[str, int]
    ttft_ms: Summary
    tpot_ms: Summary
    e2e_ms: Summary
    itl_ms: Summary
    output_tokens: int


def summarize(values: Sequence[float] | Iterable[float]) -> Summary:
    array = np.fromiter(values, dtype=float)
    if array.size == 0:
        return Summary(
            count=0, mean=None, min=None, p50=None, p90=None, p95=None, p99=None, max=None
        )
    p = percentiles(array)
    return Summary(
        count=int(array.size),
        mean=float(array.mean()),
        min=float(array.min()),
        p50=p.p50,
        p90=p.p90,
        p95=p.p95,
        p99=p.p99,
        max=float(array.max()),
    )


def aggregate(results: Sequence[ReplayResult]) -> RunAggregate:
    """Counts by outcome and error code; latency summaries over the successful requests."""
    ok = [r for r in results if r.ok]
    codes = Counter(r.error_code for r in results if r.error_code)
    return RunAggregate(
        requests=len(results),
        ok=len(ok),
        errors=len(results) - len(ok),
        error_codes=dict(sorted(codes.items())),
        ttft_ms=summarize(r.ttft_ms for r in ok if r.ttft_ms is not None),
        tpot_ms=summarize(r.tpot_ms for r in ok if r.tpot_ms is not None),
        e2e_ms=summarize(r.e2e_ms for r in ok if r.e2e_ms is not None),
        itl_ms=summarize(v for r in ok for v in r.itl_ms),
        output_tokens=sum(r.output_tokens or 0 for r in ok),
    )
