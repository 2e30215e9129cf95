"""A stage's analysis on paper: its defaults per tier, the PromQL an SRE pastes for each
engine, the batched queries a tick sends, and each side's measures from their answers."""

from __future__ import annotations

import math

import pytest

from ledger.metrics_import.histograms import histogram_quantile
from lib.promql import Matcher, parse_matchers
from releases.stage_analysis import (
    BackendSide,
    analysis_spec,
    batch_queries,
    measure_series,
    side_measures,
    side_queries,
)

LIVE = [Matcher("model_name", "=", "kb-live")]
CANARY = [Matcher("model_name", "=", "kb-canary")]


def test_the_defaults_follow_the_tier():
    production = analysis_spec({"source": "prometheus"}, tier="production")
    experimental = analysis_spec({"source": "prometheus", "interval_s": 10}, tier="experimental")

    assert production is not None and experimental is not None
    assert (production.interval_s, production.on_breach, production.auto_promote) == (
        60,
        "hold",
        False,
    )
    assert production.consecutive_error_limit == 3
    assert (experimental.interval_s, experimental.on_breach) == (10, "rollback")
    assert analysis_spec(None, tier="production") is None


def test_vllm_queries_measure_ttft_from_buckets_and_errors_from_aborts():
    queries = side_queries("vllm", [LIVE], window_s=60)

    assert queries["ttft_p95_ms"] == (
        "1000 * histogram_quantile(0.95, sum by (le) "
        '(rate(vllm:time_to_first_token_seconds_bucket{model_name="kb-live"}[60s])))'
    )
    assert queries["error_rate_pct"] == (
        '100 * sum(rate(vllm:request_success_total{model_name="kb-live", '
        'finished_reason=~"abort"}[60s])) / '
        'sum(rate(vllm:request_success_total{model_name="kb-live"}[60s]))'
    )
    assert queries["tpot_ms"].startswith("1000 * sum(rate(vllm:inter_token_latency_seconds_sum")


def test_a_side_of_two_backends_unions_their_series():
    queries = side_queries(
        "vllm", [LIVE, parse_matchers('{job="vllm", instance="b:8000"}')], window_s=30
    )

    assert (
        '(rate(vllm:time_to_first_token_seconds_bucket{model_name="kb-live"}[30s]) or '
        'rate(vllm:time_to_first_token_seconds_bucket{job="vllm", instance="b:8000"}[30s]))'
    ) in queries["ttft_p95_ms"]


def test_each_engine_measures_what_it_exposes_and_nothing_else():
    sglang = side_queries("sglang", [LIVE], window_s=60)
    tgi = side_queries("tgi", [LIVE], window_s=60)
    llama = side_queries("llama_cpp", [LIVE], window_s=60)

    assert "sglang:time_to_first_token_seconds_bucket" in sglang["ttft_p95_ms"]
    assert "sglang:num_aborted_requests_total" in sglang["error_rate_pct"]
    assert "ttft_p95_ms" not in tgi  # TGI has no TTFT histogram
    assert "tgi_request_failure{" in tgi["error_rate_pct"]  # no _total: the Rust exporter's name
    assert set(llama) == {"tpot_ms"}
    assert side_queries("ollama", [LIVE], window_s=60) == {}


def test_backends_sharing_one_label_are_asked_in_one_query_per_series():
    sides = [
        BackendSide("kb-live", "vllm", tuple(LIVE)),
        BackendSide("kb-canary", "vllm", tuple(CANARY)),
        BackendSide("odd", "vllm", tuple(parse_matchers('{job="vllm", instance="c:1"}'))),
    ]

    queries = batch_queries(sides, window_s=60)

    grouped = [q for q in queries if q.label == "model_name"]
    alone = [q for q in queries if q.label is None]
    assert len(grouped) == len(alone) == 4  # buckets, finished, tpot sum and count
    buckets = next(q for q in grouped if q.series.key == "ttft_bucket")
    assert buckets.promql == (
        "sum by (model_name, le) (increase(vllm:time_to_first_token_seconds_bucket"
        '{model_name=~"kb-canary|kb-live"}[60s]))'
    )
    assert buckets.backends == {"kb-canary": ("kb-canary",), "kb-live": ("kb-live",)}


def test_a_regex_metacharacter_in_a_value_is_escaped():
    sides = [BackendSide("dotted", "vllm", (Matcher("model_name", "=", "qwen2.5-7b"),))]

    buckets = next(q for q in batch_queries(sides, window_s=60) if q.series.key == "ttft_bucket")

    assert 'model_name=~"qwen2\\\\.5-7b"' in buckets.promql


def _sample(labels: dict[str, str], value: float) -> dict:
    return {"metric": labels, "value": [1_700_000_000, str(value)]}


def test_a_sides_measures_add_up_its_backends_then_take_the_quantile():
    sides = [
        BackendSide("a", "vllm", (Matcher("model_name", "=", "a"),)),
        BackendSide("b", "vllm", (Matcher("model_name", "=", "b"),)),
    ]
    queries = {q.series.key: q for q in batch_queries(sides, window_s=60)}
    measured: dict = {}
    bounds = ["0.1", "0.25", "0.5", "1.0", "+Inf"]
    a_counts = [10, 60, 90, 100, 100]
    b_counts = [0, 20, 80, 100, 100]
    measure_series(
        queries["ttft_bucket"],
        [_sample({"model_name": "a", "le": le}, c) for le, c in zip(bounds, a_counts, strict=True)]
        + [
            _sample({"model_name": "b", "le": le}, c)
            for le, c in zip(bounds, b_counts, strict=True)
        ],
        measured,
    )
    measure_series(
        queries["finished"],
        [
            _sample({"model_name": "a", "finished_reason": "stop"}, 95),
            _sample({"model_name": "a", "finished_reason": "abort"}, 5),
            _sample({"model_name": "b", "finished_reason": "stop"}, 100),
            _sample({"model_name": "other", "finished_reason": "abort"}, 1000),  # not ours
        ],
        measured,
    )
    measure_series(
        queries["tpot_sum"],
        [_sample({"model_name": "a"}, 4.0), _sample({"model_name": "b"}, "NaN")],
        measured,
    )
    measure_series(queries["tpot_count"], [_sample({"model_name": "a"}, 200.0)], measured)

    both = side_measures("vllm", ["a", "b"], measured)

    summed = [(0.1, 10), (0.25, 80), (0.5, 170), (1.0, 200), (math.inf, 200)]
    assert both["ttft_p95_ms"] == round(1000 * histogram_quantile(0.95, summed), 3)
    assert both["requests"] == 200
    assert both["error_rate_pct"] == 2.5
    assert both["tpot_ms"] == 20.0  # b's NaN sum is no sample
    assert both["ttft_buckets"][-1] == ["+Inf", 200]
    assert side_measures("vllm", ["nobody"], measured) == {}


@pytest.mark.parametrize("engine", ["sglang", "tgi"])
def test_engines_counting_requests_apart_measure_their_error_rate(engine):
    side = [BackendSide("x", engine, (Matcher("model_name", "=", "x"),))]
    queries = {q.series.key: q for q in batch_queries(side, window_s=60)}
    measured: dict = {}
    failed_key = "aborted" if engine == "sglang" else "failures"
    measure_series(queries["requests"], [_sample({"model_name": "x"}, 400)], measured)
    measure_series(queries[failed_key], [_sample({"model_name": "x"}, 8)], measured)

    assert side_measures(engine, ["x"], measured) == {"requests": 400, "error_rate_pct": 2.0}


def test_backends_with_the_same_matcher_each_get_its_series():
    twins = [
        BackendSide("svc-a-live", "vllm", tuple(LIVE)),
        BackendSide("svc-b-live", "vllm", tuple(LIVE)),
    ]
    finished = next(q for q in batch_queries(twins, window_s=60) if q.series.key == "finished")
    measured: dict = {}

    measure_series(
        finished, [_sample({"model_name": "kb-live", "finished_reason": "stop"}, 50)], measured
    )

    assert finished.backends == {"kb-live": ("svc-a-live", "svc-b-live")}
    assert side_measures("vllm", ["svc-a-live"], measured) == {
        "requests": 50,
        "error_rate_pct": 0.0,
    }
    assert side_measures("vllm", ["svc-b-live"], measured) == {
        "requests": 50,
        "error_rate_pct": 0.0,
    }
