"""Prometheus histograms: cumulative buckets, and quantiles as PromQL computes them."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

Bucket = tuple[float, float]  # (upper bound `le`, cumulative count)


@dataclass(frozen=True)
class Histogram:
    """One histogram series: buckets sorted by upper bound, +Inf last when present."""

    buckets: tuple[Bucket, ...]
    count: float
    sum: float

    @property
    def bounds(self) -> tuple[float, ...]:
        return tuple(le for le, _ in self.buckets)


def histogram_quantile(q: float, buckets: Sequence[Bucket]) -> float | None:
    """The q-quantile of cumulative `buckets`, as PromQL's `histogram_quantile`.

    Linear interpolation inside the bucket the rank falls in (the first bucket
    starts at 0 when its bound is positive); a rank in the +Inf bucket answers
    the highest finite bound. None where PromQL answers NaN: no +Inf bucket,
    fewer than two buckets, or no observations.
    """
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    ordered = sorted(buckets)
    if not ordered or not math.isinf(ordered[-1][0]):
        return None
    # Buckets of the same bound are one (PromQL's coalesceBuckets), and counts
    # never fall with the bound (its ensureMonotonic: float noise in the sums).
    merged: list[list[float]] = []
    for le, count in ordered:
        if merged and merged[-1][0] == le:
            merged[-1][1] += count
        else:
            merged.append([le, count])
    highest = 0.0
    for bucket in merged:
        highest = max(highest, bucket[1])
        bucket[1] = highest
    if len(merged) < 2:
        return None
    observations = merged[-1][1]
    if observations == 0:
        return None
    rank = q * observations
    b = next((i for i in range(len(merged) - 1) if merged[i][1] >= rank), len(merged) - 1)
    if b == len(merged) - 1:
        return merged[-2][0]
    if b == 0 and merged[0][0] <= 0:
        return merged[0][0]
    start, end, count = 0.0, merged[b][0], merged[b][1]
    if b > 0:
        start = merged[b - 1][0]
        count -= merged[b - 1][1]
        rank -= merged[b - 1][1]
    return start + (end - start) * (rank / count)
