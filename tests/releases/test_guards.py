"""Guard verdicts: absolute, relative to the live baseline, inconclusive by count and by
statistics, dry-run and critical guards, and a stage judged from its observations."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from releases import guards
from releases.guards import GuardSpec, guard_specs, judge_guard, judge_observation, judge_stage


def spec(metric="ttft_p95_ms", **rule) -> GuardSpec:
    return guard_specs({metric: rule})[0]


def test_a_bare_number_is_an_absolute_bound():
    (only,) = guard_specs({"ttft_p95_ms": 800})
    assert only["max"] == 800.0
    assert only["max_increase_pct"] is None
    assert not only["critical"] and not only["dry_run"]


def test_unknown_guard_metrics_are_left_out():
    assert guard_specs({"gpu_temperature": 80}) == []


def test_absolute_bound_passes_at_and_fails_above():
    at = judge_guard(spec(max=800), {"ttft_p95_ms": 800}, {})
    above = judge_guard(spec(max=800), {"ttft_p95_ms": 812.5}, {})
    assert at["status"] == "pass"
    assert above["status"] == "fail"
    assert "p95 TTFT 812.5 ms above the bound of 800 ms" in above["why"]


def test_a_higher_is_better_metric_fails_below_its_floor():
    result = judge_guard(spec("tool_call_success_pct", max=95), {"tool_call_success_pct": 91}, {})
    assert result["status"] == "fail"
    assert "below the bound of 95 %" in result["why"]


def test_structured_error_rate_is_read_from_the_json_valid_rate():
    result = judge_guard(spec("structured_error_rate_pct", max=2), {"json_valid_pct": 97}, {})
    assert result["value"] == pytest.approx(3.0)
    assert result["status"] == "fail"


def test_relative_bound_against_the_baseline():
    rule = spec(max_increase_pct=20)
    within = judge_guard(rule, {"ttft_p95_ms": 600}, {"ttft_p95_ms": 500})
    over = judge_guard(rule, {"ttft_p95_ms": 601}, {"ttft_p95_ms": 500})
    assert within["status"] == "pass"
    assert "+20.0 %" in within["why"]
    assert over["status"] == "fail"
    assert "+20.2 % worse than live" in over["why"]


def test_relative_bound_without_a_baseline_is_inconclusive():
    result = judge_guard(spec(max_increase_pct=20), {"ttft_p95_ms": 601}, {})
    assert result["status"] == "inconclusive"
    assert "no baseline p95 TTFT" in result["why"]


def test_nothing_measured_is_inconclusive():
    result = judge_guard(spec(max=800), {"requests": 900}, {})
    assert result["status"] == "inconclusive"
    assert result["why"] == "no p95 TTFT was measured for the candidate"


def test_fewer_requests_than_the_minimum_is_inconclusive_even_when_over_the_bound():
    result = judge_guard(
        spec(max=800, min_requests=200), {"requests": 120, "ttft_p95_ms": 5000}, {}
    )
    assert result["status"] == "inconclusive"
    assert "120 candidate requests, fewer than the guard's minimum of 200" in result["why"]


def _latencies(seed: int, mean: float, count: int = 200) -> list[float]:
    return list(np.random.default_rng(seed).normal(mean, 40, count).clip(1))


def test_a_relative_shift_in_raw_latencies_that_statistics_confirm_fails():
    baseline = _latencies(1, 500)
    candidate = _latencies(2, 700)
    result = judge_guard(spec(max_increase_pct=20), {}, {}, candidate, baseline)
    expected = stats.mannwhitneyu(candidate, baseline, alternative="greater").pvalue
    assert result["status"] == "fail"
    assert f"p = {expected:.3g}" in result["why"]
    # The percentile came from the raw values, as the load-test tools compute it.
    assert result["value"] == pytest.approx(np.percentile(candidate, 95))


def test_a_relative_shift_the_test_cannot_tell_from_noise_is_inconclusive():
    # Same distribution, but a tail sample that puts the candidate's p95 over +20 %.
    baseline = [100.0] * 10 + [101.0] * 10
    candidate = [100.0] * 18 + [400.0, 400.0]
    result = judge_guard(spec(max_increase_pct=20), {}, {}, candidate, baseline)
    p_value = stats.mannwhitneyu(candidate, baseline, alternative="greater").pvalue
    assert p_value >= guards.SIGNIFICANCE
    assert result["status"] == "inconclusive"
    assert "cannot be told from noise" in result["why"]


def test_too_few_raw_values_for_the_test_is_inconclusive():
    result = judge_guard(spec(max_increase_pct=20), {}, {}, [900.0] * 3, [500.0] * 3)
    assert result["status"] == "inconclusive"
    assert "at least 8 requests a side" in result["why"]


# Cumulative TTFT buckets as posted from Prometheus: seconds, "+Inf" last.
LIVE_BUCKETS = [[0.1, 5], [0.25, 45], [0.5, 245], [1, 365], [2.5, 405], ["+Inf", 412]]


def _cumulative(per_bucket):
    bounds = [0.1, 0.25, 0.5, 1, 2.5, "+Inf"]
    return [[le, float(sum(per_bucket[: i + 1]))] for i, le in enumerate(bounds)]


def test_a_relative_crossing_the_buckets_show_no_shift_for_is_inconclusive():
    # The posted p95s are 25 % apart, but the histograms hold the same requests.
    result = judge_guard(
        spec(max_increase_pct=20),
        {"ttft_p95_ms": 625, "ttft_buckets": LIVE_BUCKETS},
        {"ttft_p95_ms": 500, "ttft_buckets": LIVE_BUCKETS},
    )
    assert result["status"] == "inconclusive"
    assert (
        "+25.0 % worse than live (500 ms), over +20 %, but the shift cannot be told"
        in (result["why"])
    )
    assert (
        "candidate not shown slower than baseline: Mann-Whitney on 6 shared buckets"
        in (result["why"])
    )


def test_a_relative_crossing_the_buckets_confirm_fails():
    shifted = _cumulative([0, 0, 5, 40, 200, 167])
    result = judge_guard(
        spec(max_increase_pct=20),
        {"ttft_p95_ms": 2400, "ttft_buckets": shifted},
        {"ttft_p95_ms": 1100, "ttft_buckets": LIVE_BUCKETS},
    )
    assert result["status"] == "fail"
    assert "over +20 % (candidate slower than baseline: Mann-Whitney on 6 shared" in result["why"]


def test_a_p95_interpolated_inside_a_wide_bucket_is_not_taken_for_a_shift():
    # docs/rollouts.md's example: 60 requests a side, the p95s 65 % apart, the counts
    # never more than three requests apart.
    candidate = [[0.1, 10], [0.25, 40], [0.5, 52], [1, 56], [2.5, 60], ["+Inf", 60]]
    live = [[0.1, 11], [0.25, 42], [0.5, 55], [1, 58], [2.5, 60], ["+Inf", 60]]
    result = judge_guard(
        spec(max_increase_pct=20),
        {"ttft_p95_ms": 1375, "ttft_buckets": candidate},
        {"ttft_p95_ms": 833, "ttft_buckets": live},
    )
    assert result["status"] == "inconclusive"
    assert "p = 0.298 (60 vs 60 requests)" in result["why"]


def test_too_few_requests_in_the_buckets_is_inconclusive():
    result = judge_guard(
        spec(max_increase_pct=20),
        {"ttft_p95_ms": 900, "ttft_buckets": _cumulative([0, 0, 1, 2, 2, 0])},
        {"ttft_p95_ms": 500, "ttft_buckets": LIVE_BUCKETS},
    )
    assert result["status"] == "inconclusive"
    assert (
        "too few requests to compare: 5 candidate, 412 baseline (at least 8 each)"
        in (result["why"])
    )


def test_raw_latencies_are_tested_before_buckets():
    baseline = _latencies(1, 500)
    candidate = _latencies(2, 700)
    result = judge_guard(
        spec(max_increase_pct=20),
        {"ttft_buckets": LIVE_BUCKETS},
        {"ttft_buckets": LIVE_BUCKETS},
        candidate,
        baseline,
    )
    assert result["status"] == "fail"
    assert "Mann-Whitney U p = " in result["why"]


def test_buckets_on_one_side_only_leave_the_relative_bound_as_it_was():
    result = judge_guard(
        spec(max_increase_pct=20),
        {"ttft_p95_ms": 625, "ttft_buckets": LIVE_BUCKETS},
        {"ttft_p95_ms": 500},
    )
    assert result["status"] == "fail"
    assert result["why"] == "+25.0 % worse than live (500 ms), over +20 %"


def test_a_histogram_counts_the_requests_for_the_guards_minimum():
    rule = spec(max=800, min_requests=500)
    result = judge_guard(rule, {"ttft_p95_ms": 700, "ttft_buckets": LIVE_BUCKETS}, {})
    assert result["status"] == "inconclusive"
    assert "412 candidate requests, fewer than the guard's minimum of 500" in result["why"]
    posted = judge_guard(
        rule, {"requests": 900, "ttft_p95_ms": 700, "ttft_buckets": LIVE_BUCKETS}, {}
    )
    assert posted["status"] == "pass"


def test_observation_verdicts_and_a_dry_run_guard_that_never_counts():
    specs = guard_specs({"ttft_p95_ms": 800, "error_rate_pct": {"max": 1, "dry_run": True}})
    verdict, results = judge_observation(
        specs, candidate={"ttft_p95_ms": 700, "error_rate_pct": 5}, baseline={}
    )
    assert verdict == "pass"
    assert [r["status"] for r in results] == ["pass", "fail"]
    assert results[1]["dry_run"] is True
    failing, _ = judge_observation(specs, candidate={"ttft_p95_ms": 900}, baseline={})
    assert failing == "fail"


def test_a_metrics_source_failure_is_an_error_and_judges_nothing():
    verdict, results = judge_observation(
        guard_specs({"ttft_p95_ms": 800}),
        candidate={"ttft_p95_ms": 100},
        baseline={},
        source_error="prometheus query timed out",
    )
    assert (verdict, results) == ("error", [])


def _obs(verdict, critical_fail=False):
    results = [
        {
            "metric": "ttft_p95_ms",
            "label": "p95 TTFT",
            "status": "fail" if verdict == "fail" else "pass",
            "value": 1.0,
            "baseline": None,
            "why": "p95 TTFT 900 ms above the bound of 800 ms",
            "critical": critical_fail,
            "dry_run": False,
        }
    ]
    return {"verdict": verdict, "guard_results": results}


def test_stage_breaches_on_a_critical_failure_at_once():
    verdict, why = judge_stage([_obs("fail", critical_fail=True)], failure_limit=3, error_limit=2)
    assert verdict == "breached"
    assert "critical guard failed in observation 1" in why


def test_stage_failure_budget():
    within, why = judge_stage([_obs("fail")], failure_limit=1, error_limit=2)
    over, why_over = judge_stage([_obs("fail"), _obs("fail")], failure_limit=1, error_limit=2)
    assert within == "failing"
    assert "1 of the stage's failure budget of 1 used" in why
    assert over == "breached"
    assert "2 failed observations, more than the stage's failure budget of 1" in why_over


def test_errors_have_their_own_budget_and_never_pass():
    held, _ = judge_stage([_obs("pass"), _obs("error")], failure_limit=1, error_limit=2)
    breached, why = judge_stage([_obs("error")] * 3, failure_limit=1, error_limit=2)
    assert held == "held"
    assert breached == "breached"
    assert "metrics source failed 3 times" in why


def test_an_inconclusive_latest_observation_holds_the_stage_for_a_person():
    verdict, why = judge_stage([_obs("pass"), _obs("inconclusive")], failure_limit=1, error_limit=2)
    assert verdict == "held"
    assert "a person decides" in why


def test_no_observation_yet_is_awaiting():
    assert judge_stage([], failure_limit=1, error_limit=2)[0] == "awaiting"
