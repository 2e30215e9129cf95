"""The baseline-relative test on Prometheus histograms: Mann-Whitney U on bucket indexes,
computed from the counts, inconclusive when the buckets cannot tell."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from releases.histogram_shift import binned_counts, histogram_shift, mann_whitney_greater

INF = math.inf
BOUNDS = [0.1, 0.25, 0.5, 1.0, 2.5, INF]  # seconds, as vLLM's TTFT histogram cuts them
TYPICAL = [5, 40, 200, 120, 40, 7]  # requests per bucket, 412 in all


def cumulative(per_bucket, bounds=BOUNDS):
    total = 0.0
    buckets = []
    for le, count in zip(bounds, per_bucket, strict=True):
        total += count
        buckets.append((le, total))
    return buckets


def judge(candidate, baseline, min_requests=8):
    return histogram_shift(candidate, baseline, min_requests=min_requests, significance=0.05)


def test_binned_counts_differences_cumulative_buckets_from_zero():
    assert binned_counts(cumulative([3, 37, 0, 2], [0.1, 0.25, 0.5, INF])) == [
        (0.0, 0.1, 3.0),
        (0.1, 0.25, 37.0),
        (0.25, 0.5, 0.0),
        (0.5, INF, 2.0),
    ]


def test_binned_counts_coalesces_equal_bounds_and_never_falls_like_promql():
    # Unsorted, a bound given twice (summed), and float noise in a rate that would
    # make a later cumulative count smaller (held at the highest seen).
    buckets = [(INF, 41.5), (0.1, 3.2), (0.25, 40.7), (0.25, 1.0), (0.5, 41.6)]
    assert binned_counts(buckets) == [
        (0.0, 0.1, 3.2),
        (0.1, 0.25, pytest.approx(38.5)),
        (0.25, 0.5, 0.0),
        (0.5, INF, 0.0),
    ]


def test_identical_distributions_are_not_slower():
    result = judge(cumulative(TYPICAL), cumulative(TYPICAL))
    assert result.slower is False
    assert result.p_value == pytest.approx(0.5, abs=0.01)
    assert result.why.startswith("candidate not shown slower than baseline")
    assert "(412 vs 412 requests)" in result.why


def test_a_candidate_whose_mass_sits_two_buckets_higher_is_slower():
    shifted = [0, 0, 5, 40, 200, 167]
    result = judge(cumulative(shifted), cumulative(TYPICAL))
    assert result.slower is True
    assert result.p_value is not None and result.p_value < 1e-10
    assert result.why.startswith("candidate slower than baseline: Mann-Whitney on 6 shared buckets")


def test_a_faster_candidate_is_not_slower():
    faster = [45, 200, 120, 40, 7, 0]
    result = judge(cumulative(faster), cumulative(TYPICAL))
    assert result.slower is False
    assert result.p_value is not None and result.p_value > 0.99


def test_too_few_requests_is_inconclusive_and_names_both_counts():
    result = judge(cumulative([0, 1, 3, 1, 0, 0]), cumulative([5, 40, 60, 10, 4, 1]))
    assert result.slower is None and result.p_value is None
    assert result.why == "too few requests to compare: 5 candidate, 120 baseline (at least 8 each)"
    assert (result.candidate_requests, result.baseline_requests) == (5, 120)


def test_too_few_on_the_baseline_side_is_inconclusive_too():
    result = judge(cumulative(TYPICAL), cumulative([0, 0, 3, 0, 0, 0]), min_requests=20)
    assert result.slower is None
    assert "412 candidate, 3 baseline (at least 20 each)" in result.why


def test_everything_in_one_bucket_is_inconclusive():
    one = [0, 0, 30, 0, 0, 0]
    result = judge(cumulative(one), cumulative(one))
    assert result.slower is None
    assert "fall in one bucket (0.25 to 0.5)" in result.why


def test_everything_in_the_inf_bucket_is_inconclusive():
    result = judge(cumulative([0, 0, 0, 0, 0, 50]), cumulative([0, 0, 0, 0, 0, 90]))
    assert result.slower is None
    assert "fall in one bucket (above 2.5)" in result.why


def test_histograms_sharing_no_finite_bound_are_inconclusive():
    other = cumulative([5, 40, 200, 120, 47], [0.05, 0.2, 0.4, 0.8, INF])
    result = judge(cumulative(TYPICAL), other)
    assert result.slower is None
    assert "share no finite bucket bound" in result.why


def test_different_bounds_are_compared_exactly_on_the_bounds_they_share():
    # The candidate is cut finer; on the baseline's bounds (0.25, 1.0, +Inf) it has
    # exactly the counts a coarser histogram of the same requests would have.
    candidate = cumulative([0, 5, 40, 200, 120, 47])
    baseline = cumulative([45, 320, 47], [0.25, 1.0, INF])
    coarse = cumulative([5, 240, 167], [0.25, 1.0, INF])
    result = judge(candidate, baseline)
    assert result == judge(coarse, baseline)
    assert "Mann-Whitney on 3 shared buckets" in result.why
    assert result.slower is True


def test_a_histogram_without_an_inf_bucket_is_inconclusive():
    result = judge(cumulative(TYPICAL[:-1], BOUNDS[:-1]), cumulative(TYPICAL))
    assert result.slower is None
    assert "candidate's histogram has no +Inf bucket" in result.why


def test_non_integer_counts_are_rounded_to_whole_requests():
    # increase() extrapolates to the window's edges: 5.4, 45.2, ... are not whole.
    rates = cumulative([x * 1.04 for x in TYPICAL])
    result = judge(rates, cumulative(TYPICAL))
    whole = [math.floor(total + 0.5) for _, total in rates]
    assert result.candidate_requests == whole[-1] == 428
    assert result.slower is False
    assert result.p_value is not None


def test_fractional_rates_below_one_request_are_too_few():
    per_second = cumulative([x / 60 for x in TYPICAL])  # rate(), not increase()
    result = judge(per_second, cumulative(TYPICAL))
    assert result.slower is None
    assert result.why.startswith("too few requests to compare: 7 candidate")


def test_millions_of_requests_are_judged_from_the_counts():
    baseline = cumulative([x * 10_000 for x in TYPICAL])  # 4.12 million requests
    candidate = cumulative([x * 10_000 for x in [5, 40, 199, 121, 40, 7]])
    result = judge(candidate, baseline)
    assert (result.candidate_requests, result.baseline_requests) == (4_120_000, 4_120_000)
    # One request in 412 moved up a bucket: at this volume, that is a real shift.
    assert result.slower is True
    assert "(4,120,000 vs 4,120,000 requests)" in result.why


@pytest.mark.parametrize("seed", range(12))
def test_u_and_p_equal_scipy_on_the_expanded_bucket_indexes(seed):
    rng = np.random.default_rng(seed)
    bins = int(rng.integers(2, 9))
    candidate = rng.integers(0, 15, bins)
    baseline = rng.integers(0, 15, bins)
    candidate[0] += 1  # neither side empty, and at least two occupied bins
    baseline[-1] += 1
    expected = stats.mannwhitneyu(
        np.repeat(np.arange(bins), candidate),
        np.repeat(np.arange(bins), baseline),
        alternative="greater",
        method="asymptotic",
        use_continuity=True,
    )
    u, p_value = mann_whitney_greater(candidate.astype(float), baseline.astype(float))
    assert u == pytest.approx(expected.statistic)
    assert p_value == pytest.approx(expected.pvalue, rel=1e-9)


def test_histogram_shift_reports_the_p_value_scipy_gives():
    candidate, baseline = [2, 6, 9, 5, 3, 1], [4, 9, 7, 3, 1, 0]
    expected = stats.mannwhitneyu(
        np.repeat(np.arange(6), candidate),
        np.repeat(np.arange(6), baseline),
        alternative="greater",
        method="asymptotic",
        use_continuity=True,
    ).pvalue
    result = judge(cumulative(candidate), cumulative(baseline))
    assert result.p_value == pytest.approx(expected, rel=1e-9)
    assert f"p = {expected:.3g}" in result.why
