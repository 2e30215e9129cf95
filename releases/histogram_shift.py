"""Whether a candidate's latencies are shifted higher than the baseline's, when only
Prometheus histogram bucket counts are known.

The method is the one-sided Mann-Whitney U test the raw-value path uses, applied to
the bucket index of each request: binned data is ordinal data with heavy ties. Why that
is sound, and where it is weak:

- The test reads only order. Buckets are ordered (every request in bucket i is faster
  than every request in bucket i + 1), so a request's bucket is a faithful ordinal
  value; its latency inside the bucket is unknown, and the requests of one bucket are
  ties. Ties are what the average-rank statistic and the tie-corrected variance of the
  normal approximation account for (the Wilcoxon-Mann-Whitney test on a 2-by-k ordered
  table; Emerson & Moses, Biometrics 41, 1985). No midpoint or value inside a bucket is
  invented: any monotone choice of one value per bucket gives the same ranks.
- U and its tie-corrected normal approximation are computed from the counts (one sum
  per bucket), never by expanding a list of requests, so millions of requests cost as
  much as a dozen. The figures equal `scipy.stats.mannwhitneyu(..., alternative=
  "greater", method="asymptotic", use_continuity=True)` on the expanded bucket indexes.
- Coarse buckets hide shifts inside one bucket; a shift within the +Inf bucket (above
  the highest finite bound) cannot be seen at all. Everything in one bucket orders
  nothing: inconclusive. The test says *slower*, not *by how much*: the size of the
  shift is the guard's percentile comparison.
- Both sides must be cut at the same bounds. A cumulative bucket counts exactly the
  requests at or under its bound, so histograms with different bounds are compared
  exactly on the bounds they share (a coarser, honest view); none shared: inconclusive.
- Counts from `increase()` are extrapolated and rarely whole. The test counts requests,
  so cumulative counts are rounded to whole requests (half up; rounding keeps them
  monotonic). A per-second `rate()` is not a count of requests: post the increase over
  the window.
- A histogram without a +Inf bucket does not count its slowest requests: inconclusive.

Pure functions over plain data: no database here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # the package's __init__ loads Django models; only the alias is needed
    from ledger.metrics_import.histograms import Bucket

Bin = tuple[float, float, float]  # (lower bound, upper bound, count in between)


@dataclass(frozen=True)
class ShiftTest:
    slower: bool | None  # None: cannot tell (inconclusive)
    p_value: float | None
    candidate_requests: float  # the whole requests the test counted
    baseline_requests: float
    why: str


def binned_counts(buckets: Sequence[Bucket]) -> list[Bin]:
    """Cumulative `le` buckets as per-bin (lower, upper, count), lowest bin first.

    As PromQL's `histogram_quantile` reads them: buckets of one bound are one (their
    counts summed) and a cumulative count never falls with the bound (float noise in
    rates). The first bin starts at 0 when its bound is positive, as PromQL's does.
    Counts may be rates or extrapolated increases; they are not rounded here.
    """
    bins: list[Bin] = []
    lower, below = None, 0.0
    for le, count in _coalesced(buckets):
        if lower is None:
            lower = 0.0 if le > 0 else -math.inf
        bins.append((lower, le, count - below))
        lower, below = le, count
    return bins


def _coalesced(buckets: Sequence[Bucket]) -> list[Bucket]:
    # The same reading as histogram_quantile's coalesceBuckets and ensureMonotonic.
    merged: list[list[float]] = []
    for le, count in sorted(buckets):
        if merged and merged[-1][0] == le:
            merged[-1][1] += count
        else:
            merged.append([le, count])
    highest = 0.0
    for bucket in merged:
        highest = max(highest, bucket[1])
        bucket[1] = highest
    return [(le, count) for le, count in merged]


def histogram_shift(
    candidate: Sequence[Bucket],
    baseline: Sequence[Bucket],
    *,
    min_requests: int,
    significance: float,
) -> ShiftTest:
    """Whether the candidate's distribution is shifted higher (slower) than the
    baseline's, from their cumulative bucket counts: a one-sided Mann-Whitney U on the
    requests' bucket indexes (see the module docstring for why that is sound).

    Inconclusive (`slower` None) when either side lacks a +Inf bucket, when the sides
    share no finite bound, when either side has fewer than `min_requests` requests
    (callers pass at least the raw path's minimum), or when every request falls in one
    shared bucket.
    """
    for side, buckets in (("candidate", candidate), ("baseline", baseline)):
        if not any(math.isinf(le) and le > 0 for le, _ in buckets):
            return _cannot_tell(
                f"the {side}'s histogram has no +Inf bucket, so its slowest requests are "
                "not counted"
            )
    shared = sorted(
        {le for le, _ in candidate if not math.isinf(le)}
        & {le for le, _ in baseline if not math.isinf(le)}
    )
    if not shared:
        return _cannot_tell(
            "the candidate's and the baseline's histograms share no finite bucket bound, "
            "so their counts cannot be compared"
        )
    mine = _whole_requests(candidate, shared)
    theirs = _whole_requests(baseline, shared)
    n_mine, n_theirs = float(mine.sum()), float(theirs.sum())
    if n_mine < min_requests or n_theirs < min_requests:
        return _cannot_tell(
            f"too few requests to compare: {n_mine:,.0f} candidate, {n_theirs:,.0f} "
            f"baseline (at least {min_requests} each)",
            n_mine,
            n_theirs,
        )
    occupied = np.flatnonzero(mine + theirs)
    if len(occupied) < 2:
        return _cannot_tell(
            f"all {n_mine:,.0f} candidate and {n_theirs:,.0f} baseline requests fall in one "
            f"bucket ({_bin_words(shared, int(occupied[0]))}), which cannot order them",
            n_mine,
            n_theirs,
        )
    p_value = mann_whitney_greater(mine, theirs)[1]
    slower = p_value < significance
    verdict = (
        "candidate slower than baseline" if slower else "candidate not shown slower than baseline"
    )
    return ShiftTest(
        slower=slower,
        p_value=p_value,
        candidate_requests=n_mine,
        baseline_requests=n_theirs,
        why=(
            f"{verdict}: Mann-Whitney on {len(shared) + 1} shared buckets, p = {p_value:.3g} "
            f"({n_mine:,.0f} vs {n_theirs:,.0f} requests)"
        ),
    )


def _cannot_tell(why: str, candidate: float = 0.0, baseline: float = 0.0) -> ShiftTest:
    return ShiftTest(
        slower=None,
        p_value=None,
        candidate_requests=candidate,
        baseline_requests=baseline,
        why=why,
    )


def _whole_requests(buckets: Sequence[Bucket], shared: Sequence[float]) -> np.ndarray:
    """Whole requests per bin of the shared bounds, +Inf last: each cumulative count at a
    shared bound is exact, so coarsening onto those bounds invents nothing."""
    at = dict(_coalesced(buckets))
    cumulative = [at[le] for le in shared] + [at[math.inf]]
    # Rounding a non-decreasing sequence keeps it non-decreasing: no negative bin.
    whole = np.floor(np.asarray(cumulative, dtype=float) + 0.5)
    return np.diff(whole, prepend=0.0)


def _bin_words(shared: Sequence[float], index: int) -> str:
    if index == len(shared):
        return f"above {shared[-1]:g}"
    lower = f"{shared[index - 1]:g}" if index else "0"
    return f"{lower} to {shared[index]:g}"


def mann_whitney_greater(candidate: np.ndarray, baseline: np.ndarray) -> tuple[float, float]:
    """U of the candidate and its one-sided p-value ("greater"), from counts per ordered
    bin: the normal approximation with tie correction and continuity correction, as
    `scipy.stats.mannwhitneyu(method="asymptotic")` computes it on expanded values."""
    n1, n2 = float(candidate.sum()), float(baseline.sum())
    below = np.cumsum(baseline) - baseline  # baseline requests in lower bins
    # Each candidate request beats the baseline requests below it and ties half of
    # those in its own bin.
    u = float(np.sum(candidate * (below + baseline / 2)))
    n = n1 + n2
    ties = candidate + baseline
    tie_term = float(np.sum(ties**3 - ties))
    sigma = math.sqrt(n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1))))
    z = (u - n1 * n2 / 2 - 0.5) / sigma
    from scipy import stats  # type: ignore[import-untyped]  # 1.6 s to import: only here

    return u, float(stats.norm.sf(z))
