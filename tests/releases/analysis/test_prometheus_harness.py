"""The harness the rollout-analysis tests stand on: a real Prometheus scraping two fake
engines whose latency and errors the test sets (conftest.py). Each wait is on what
Prometheus itself reports (``wait_for``); the windows are 15 s, so a change shows in
full once the old samples have left the window."""

from __future__ import annotations

import math
import os

import pytest

from tests.releases.analysis.conftest import CANDIDATE_MODEL, LIVE_MODEL
from tests.support.prometheus import PrometheusServer, PrometheusUnavailable

TTFT_P95 = (
    "histogram_quantile(0.95, sum by (le, model_name) "
    "(rate(vllm:time_to_first_token_seconds_bucket[15s])))"
)
ABORT_RATIO = (
    'sum by (model_name) (rate(vllm:request_success_total{finished_reason="abort"}[15s]))'
    " / sum by (model_name) (rate(vllm:request_success_total[15s]))"
)


def by_model(result: list[dict]) -> dict[str, float]:
    return {sample["metric"]["model_name"]: float(sample["value"][1]) for sample in result}


def within(low: float, high: float):
    """A value inside one of vLLM's TTFT buckets, (low, high]: its p95 lands there."""
    return lambda value: value is not None and not math.isnan(value) and low < value <= high


def wait_for_models(prometheus: PrometheusServer, promql: str, **expected) -> dict[str, float]:
    """Until each model's value satisfies its predicate; the values by model name."""
    names = {"live": LIVE_MODEL, "candidate": CANDIDATE_MODEL}
    wanted = {names[role]: predicate for role, predicate in expected.items()}
    result = prometheus.wait_for(
        promql,
        lambda result: all(test(by_model(result).get(m)) for m, test in wanted.items()),
    )
    return by_model(result)


def test_prometheus_scrapes_both_engines_under_their_model_names(prometheus, live_engine):
    up = prometheus.wait_for(
        'up{job="engines"}', lambda r: len(r) == 2 and all(s["value"][1] == "1" for s in r)
    )
    assert {s["metric"]["instance"] for s in up} == set(prometheus.targets)
    assert prometheus.values('up{job="engines"}', "instance") == dict.fromkeys(
        prometheus.targets, 1.0
    )
    assert prometheus.targets_health()[live_engine.target] == "up"

    # vLLM's series are there before any request, labelled with each server's name.
    models = prometheus.wait_for(
        'count by (model_name) (vllm:request_success_total{job="engines"})',
        lambda r: len(r) == 2,
    )
    assert {s["metric"]["model_name"] for s in models} == {LIVE_MODEL, CANDIDATE_MODEL}


def test_the_ttft_p95_of_each_engine_follows_the_latency_the_test_sets(prometheus, engine_traffic):
    live, candidate = engine_traffic
    live.traffic(rps=20, ttft_ms=200, itl_ms=20, error_pct=0)
    candidate.traffic(rps=20, ttft_ms=600, itl_ms=20, error_pct=0)

    # vLLM's TTFT buckets around them: (0.1, 0.25] and (0.5, 0.75].
    values = wait_for_models(
        prometheus, TTFT_P95, live=within(0.1, 0.25), candidate=within(0.5, 0.75)
    )
    assert values[LIVE_MODEL] < values[CANDIDATE_MODEL]

    candidate.traffic(ttft_ms=1500)  # the candidate slows down; the live engine does not

    moved = wait_for_models(
        prometheus, TTFT_P95, live=within(0.1, 0.25), candidate=within(1.0, 2.5)
    )
    assert moved[CANDIDATE_MODEL] > values[CANDIDATE_MODEL]


def test_the_abort_ratio_of_each_engine_reflects_its_error_pct(prometheus, engine_traffic):
    live, candidate = engine_traffic
    live.traffic(rps=20, ttft_ms=200, error_pct=0)
    candidate.traffic(rps=20, ttft_ms=200, error_pct=20)

    values = wait_for_models(
        prometheus,
        ABORT_RATIO,
        live=lambda v: v == 0,
        candidate=lambda v: v is not None and abs(v - 0.20) <= 0.03,
    )
    assert values[LIVE_MODEL] == 0

    candidate.traffic(error_pct=0)  # the candidate recovers

    wait_for_models(prometheus, ABORT_RATIO, candidate=lambda v: v == 0)


def test_a_stopped_prometheus_answers_nothing_and_starts_again(prometheus, engine_traffic):
    before = prometheus.wait_for('up{job="engines"}', lambda r: len(r) == 2)
    scraped_at = float(before[0]["value"][0])
    process = prometheus.process
    assert process is not None

    prometheus.stop()

    assert not prometheus.running
    assert process.returncode is not None  # ended and reaped, not left behind
    with pytest.raises(ProcessLookupError):
        os.killpg(process.pid, 0)  # nothing is left of its process group either
    with pytest.raises(PrometheusUnavailable):
        prometheus.query("up")

    prometheus.start()

    up = prometheus.wait_for(
        'up{job="engines"}', lambda r: len(r) == 2 and all(s["value"][1] == "1" for s in r)
    )
    assert len(up) == 2
    # What it scraped before the stop is still in its TSDB, as after a real restart.
    assert len(prometheus.query('up{job="engines"}', at=scraped_at)) == 2


def test_a_query_prometheus_refuses_raises_with_its_own_words(prometheus):
    with pytest.raises(RuntimeError, match="parse error"):
        prometheus.query("sum by (")
