"""The Prometheus path: real exposition text of vLLM and llama.cpp server, parsed with
prometheus_client's parser, differenced, and read like PromQL's histogram_quantile.

The vLLM fixtures are two scrapes of one server a day apart (tests/fixtures/prometheus/
vllm_before.txt and vllm_after.txt); the llama.cpp ones straddle a restart of the
server, so every counter is lower after than before.
"""

from __future__ import annotations

import math

import pytest

from ledger.metrics_import import (
    ExpositionError,
    Histogram,
    engine_for,
    histogram_quantile,
    parse_exposition,
    summarize,
)
from ledger.metrics_import.deltas import Resets, counter_increase, histogram_increase
from tests.ledger.run_evidence.conftest import scrape_text

MODEL = (("engine", "0"), ("model_name", "Qwen/Qwen2.5-7B-Instruct"))


def _summary(engine: str, before: str, after: str):
    return summarize(
        engine_for(engine),
        parse_exposition(scrape_text(before), source=before),
        parse_exposition(scrape_text(after), source=after),
    )


def test_vllm_ttft_percentiles_are_the_bucket_increases_interpolated_by_hand():
    fields = _summary("vllm", "vllm_before.txt", "vllm_after.txt").fields

    # Over the day the TTFT buckets grew by (le: count in that bucket): 0.06: 100,
    # 0.08: 200, 0.1: 300, 0.25: 300, 0.5: 60, 0.75: 30, 1.0: 10; 1,000 in all.
    # p50: rank 500 falls in (0.08, 0.1], which holds 300 with 300 below it:
    #      0.08 + 0.02 * (500 - 300) / 300 = 0.093333 s.
    # p95: rank 950 falls in (0.25, 0.5], 60 with 900 below: 0.25 + 0.25 * 50 / 60.
    # p99: rank 990 is the top of (0.5, 0.75], 30 with 960 below: 0.75 s.
    assert fields["ttft_p50_ms"] == pytest.approx(93.333, abs=0.001)
    assert fields["ttft_p95_ms"] == pytest.approx(250 + 250 * 50 / 60, abs=0.001)
    assert fields["ttft_p99_ms"] == pytest.approx(750.0)
    # The same scrape read in full, not only the bucket at hand.
    assert fields["tpot_p95_ms"] is not None and fields["e2e_p95_ms"] is not None


def test_vllm_requests_errors_and_truncation_come_from_the_day_increase():
    found = _summary("vllm", "vllm_before.txt", "vllm_after.txt")
    fields, details = found.fields, found.details

    # Chat completions only: 1,000 2xx, 8 4xx and 2 5xx (a series that appeared
    # during the day counts from 0); /health and /metrics are not traffic.
    assert fields["requests"] == 1010
    assert fields["error_counts"] == {"4xx": 8, "5xx": 2}
    assert fields["rate_4xx"] == pytest.approx(8 / 1010, abs=1e-6)
    assert fields["rate_5xx"] == pytest.approx(2 / 1010, abs=1e-6)
    # Finished because of the max length: 40 of the 1,000 that finished.
    assert fields["truncation_rate"] == pytest.approx(0.04)
    assert details["finished"] == {"abort": 10, "length": 40, "stop": 950}
    assert fields["cache_hit_rate"] == pytest.approx(20000 / 50000)
    assert details["kv_cache_usage"] == 0.35
    assert details["prompt_tokens"] == 500000
    assert details["metrics"]["tpot"] == "vllm:inter_token_latency_seconds"
    assert details["metrics"]["kv_cache_usage"] == "vllm:kv_cache_usage_perc"
    assert details["counter_resets"] == []


def test_older_vllm_names_are_read_when_the_new_ones_are_absent():
    renamed = {
        "vllm:inter_token_latency_seconds": "vllm:time_per_output_token_seconds",
        "vllm:kv_cache_usage_perc": "vllm:gpu_cache_usage_perc",
    }

    def older(name: str) -> str:
        text = scrape_text(name)
        for new, old in renamed.items():
            text = text.replace(new, old)
        return text

    found = summarize(
        engine_for("vllm"),
        parse_exposition(older("vllm_before.txt")),
        parse_exposition(older("vllm_after.txt")),
    )
    new = _summary("vllm", "vllm_before.txt", "vllm_after.txt")

    assert found.details["metrics"]["tpot"] == "vllm:time_per_output_token_seconds"
    assert found.details["metrics"]["kv_cache_usage"] == "vllm:gpu_cache_usage_perc"
    assert found.fields["tpot_p95_ms"] == new.fields["tpot_p95_ms"]


def test_llamacpp_counters_lower_after_a_restart_count_from_the_restart():
    found = _summary("llama_cpp", "llamacpp_before.txt", "llamacpp_after_restart.txt")

    # Before the restart the server had predicted 80,000 tokens in 2,000 s; after
    # it, 10,000 in 250 s. The day's increase is what was counted since the
    # restart, never 10,000 - 80,000.
    assert found.details["generation_tokens"] == 10000
    assert found.details["prompt_tokens"] == 20000
    assert found.details["tpot_mean_ms"] == pytest.approx(25.0)
    assert "llamacpp:tokens_predicted" in found.details["counter_resets"]
    # llama.cpp keeps no request count and no latency histograms: unknown, not 0.
    assert found.fields["requests"] is None
    assert found.fields["ttft_p95_ms"] is None
    assert set(found.details["missing"]) == {"requests", "ttft_p95_ms", "tpot_p95_ms", "e2e_p95_ms"}


def test_llamacpp_without_a_restart_is_a_plain_difference():
    found = _summary("llama_cpp", "llamacpp_before.txt", "llamacpp_before.txt")

    assert found.details["generation_tokens"] == 0
    assert found.details["counter_resets"] == []


def test_a_counter_reset_counts_the_value_since_the_restart():
    resets = Resets()

    increase = counter_increase("c", {MODEL: 500.0, (): 10.0}, {MODEL: 30.0, (): 25.0}, resets)

    assert increase == {MODEL: 30.0, (): 15.0}
    assert resets.series == ['c{engine="0",model_name="Qwen/Qwen2.5-7B-Instruct"}']


def test_a_histogram_reset_takes_the_later_scrape_whole():
    before = Histogram(((0.1, 50.0), (1.0, 90.0), (math.inf, 100.0)), 100.0, 30.0)
    after = Histogram(((0.1, 4.0), (1.0, 9.0), (math.inf, 10.0)), 10.0, 3.0)
    resets = Resets()

    increase = histogram_increase("h", {(): before}, {(): after}, resets)

    assert increase[()] == after
    assert resets.series == ["h"]


@pytest.mark.parametrize(
    ("q", "buckets", "expected"),
    [
        # Inside the first bucket, which starts at 0: 0.5 * 10 / 10 of (0, 1].
        (0.5, [(1.0, 10.0), (2.0, 10.0), (math.inf, 10.0)], 0.5),
        # Ranked in +Inf: the highest finite bound.
        (0.99, [(1.0, 1.0), (2.0, 2.0), (math.inf, 100.0)], 2.0),
        # Empty histogram: NaN in PromQL, None here.
        (0.95, [(1.0, 0.0), (math.inf, 0.0)], None),
        # No +Inf bucket: NaN.
        (0.5, [(1.0, 3.0), (2.0, 4.0)], None),
        # Only +Inf: fewer than two buckets.
        (0.5, [(math.inf, 4.0)], None),
        # A first bucket at or below 0 answers its bound.
        (0.1, [(0.0, 5.0), (1.0, 10.0), (math.inf, 10.0)], 0.0),
    ],
)
def test_histogram_quantile_matches_promql(q, buckets, expected):
    assert histogram_quantile(q, buckets) == (
        pytest.approx(expected) if expected is not None else None
    )


def test_malformed_exposition_text_names_the_file_and_line():
    text = scrape_text("vllm_after.txt").splitlines()
    text[12] = 'http_requests_total{handler="/v1/chat/completions" 7'

    with pytest.raises(ExpositionError) as caught:
        parse_exposition("\n".join(text) + "\n", source="after.txt")

    assert caught.value.line == 13
    assert str(caught.value).startswith("after.txt, line 13:")


def test_an_unknown_engine_names_the_known_ones():
    with pytest.raises(KeyError, match="known: vllm, sglang, tgi, llama_cpp"):
        engine_for("ollama")


def test_sglang_requests_latency_and_cache_hits():
    found = _summary("sglang", "sglang_before.txt", "sglang_after.txt")

    assert found.fields["requests"] == 800
    # TTFT over the day: 200 in (0, 0.1], 400 in (0.1, 0.25], 150, then 50. p50 is
    # rank 400 in (0.1, 0.25]: 0.1 + 0.15 * 200 / 400 = 0.175 s.
    assert found.fields["ttft_p50_ms"] == pytest.approx(175.0)
    # Cached over prompt tokens: 240,000 of 800,000.
    assert found.fields["cache_hit_rate"] == pytest.approx(0.3)
    assert found.details["aborted"] == 4
    assert found.details["metrics"]["tpot"] == "sglang:inter_token_latency_seconds"


def test_tgi_failures_by_kind_and_no_ttft():
    found = _summary("tgi", "tgi_before.txt", "tgi_after.txt")

    assert found.fields["requests"] == 500
    assert found.fields["error_counts"] == {"overloaded": 6, "validation": 12}
    assert found.fields["ttft_p95_ms"] is None and "ttft_p95_ms" in found.details["missing"]
    assert found.fields["e2e_p50_ms"] is not None
    assert found.details["prompt_tokens"] == 241000
