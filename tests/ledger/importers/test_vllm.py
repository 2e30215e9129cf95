from __future__ import annotations

import json

import numpy as np
import pytest

from .files import load_json, parse, parse_bytes

SAMPLE = ("vllm", "vllm_c2_n20_detailed.json")


@pytest.fixture
def raw() -> dict:
    return load_json(*SAMPLE)


def test_vllm_detailed_result_is_read_as_one_computed_level():
    report = parse(*SAMPLE)

    assert (report.tool, report.format, report.variant) == ("vllm", "vllm", "bench-serve-json")
    assert report.tool_version is None  # the file does not say
    assert report.source == "computed"
    assert len(report.levels) == 1
    assert report.meta["server"] == "llama-cpp-python-0.3.36"
    assert report.meta["quant"] == "q4_k_m"
    assert report.meta["model_id"] == "gemma-3-270m"


def test_vllm_conditions_come_from_the_file(raw):
    cond = parse(*SAMPLE).levels[0].conditions

    assert cond.concurrency == 2
    assert cond.request_rate is None
    assert cond.request_rate_unlimited is True  # "request_rate": "inf"
    assert (cond.requests, cond.successful, cond.errored) == (20, 20, 0)
    assert cond.error_rate == 0.0
    assert cond.duration_s == raw["duration"]
    assert cond.prompt_tokens.mean == np.mean(raw["input_lens"])
    assert cond.output_tokens.p90 == np.percentile(raw["output_lens"], 90)


def test_vllm_percentiles_match_numpy_on_the_per_request_arrays(raw):
    level = parse(*SAMPLE).levels[0]

    # vLLM computes np.percentile on seconds and multiplies by 1000: bit for bit.
    for q in (50, 90, 95, 99):
        assert getattr(level.ttft, f"p{q}") == raw[f"p{q}_ttft_ms"]
        assert getattr(level.ttft, f"p{q}") == np.percentile(raw["ttfts"], q) * 1000
    assert level.ttft.mean == raw["mean_ttft_ms"]
    assert level.ttft.max == max(raw["ttfts"]) * 1000
    assert level.e2e.p99 == raw["p99_e2el_ms"]


def test_vllm_tpot_is_e2e_minus_ttft_over_output_tokens_minus_one(raw):
    level = parse(*SAMPLE).levels[0]
    e2e, ttft = np.array(raw["latencies"]), np.array(raw["ttfts"])
    tpot = (e2e - ttft) / (np.array(raw["output_lens"]) - 1)

    assert level.tpot.p99 == np.percentile(tpot, 99) * 1000
    assert level.tpot.p99 == pytest.approx(raw["p99_tpot_ms"], rel=1e-12)
    assert level.tpot.mean == pytest.approx(raw["mean_tpot_ms"], rel=1e-12)


def test_vllm_itl_pools_every_gap_of_every_request(raw):
    level = parse(*SAMPLE).levels[0]
    gaps = np.concatenate([np.array(row) for row in raw["itls"]])

    assert level.itl.p95 == np.percentile(gaps, 95) * 1000
    assert level.itl.p99 == pytest.approx(raw["p99_itl_ms"], rel=1e-12)
    assert level.itl.max == gaps.max() * 1000


def test_vllm_per_request_arrays_are_in_milliseconds(raw):
    requests = parse(*SAMPLE).levels[0].requests

    assert requests is not None
    assert len(requests) == 20
    assert requests.ttft_ms[0] == raw["ttfts"][0] * 1000
    assert requests.e2e_ms[3] == raw["latencies"][3] * 1000
    assert list(requests.output_tokens) == raw["output_lens"]
    assert not requests.error.any()


def test_vllm_failed_request_is_counted_as_an_error_and_left_out_of_percentiles(raw):
    raw["errors"][4] = 'Traceback (most recent call last):\n  File "x"\nConnectionResetError'
    raw["ttfts"][4] = 0.0
    raw["latencies"][4] = 0.0
    raw["itls"][4] = []
    raw["completed"], raw["failed"] = 19, 1

    level = parse_bytes(json.dumps(raw).encode()).levels[0]
    ok = [t for i, t in enumerate(raw["ttfts"]) if i != 4]

    assert (level.conditions.requests, level.conditions.errored) == (20, 1)
    assert level.conditions.error_rate == pytest.approx(0.05)
    assert level.ttft.p50 == np.percentile(ok, 50) * 1000
    assert level.requests.error[4]
    assert np.isnan(level.requests.ttft_ms[4])


def test_vllm_result_without_save_detailed_uses_the_tools_numbers(raw):
    for key in (
        "input_lens",
        "output_lens",
        "ttfts",
        "itls",
        "latencies",
        "start_times",
        "queue_times",
        "generated_texts",
        "errors",
    ):
        del raw[key]

    report = parse_bytes(json.dumps(raw).encode())
    level = report.levels[0]

    assert report.source == "tool"
    assert level.source == "tool"
    assert level.requests is None
    assert level.ttft.p99 == raw["p99_ttft_ms"]
    assert level.tpot.p50 == raw["p50_tpot_ms"]
    assert level.e2e.p95 == raw["p95_e2el_ms"]
    assert level.ttft.max is None
    assert (level.conditions.requests, level.conditions.errored) == (20, 0)
    assert level.conditions.output_tokens.mean == raw["total_output_tokens"] / 20


def test_old_benchmark_serving_output_without_latencies_rebuilds_e2e_from_ttft_and_itls(raw):
    # benchmark_serving.py wrote ttfts and itls but no per-request latencies.
    del raw["latencies"]

    report = parse_bytes(json.dumps(raw).encode())
    level = report.levels[0]

    assert report.source == "computed"
    assert level.e2e.p99 == pytest.approx(raw["p99_e2el_ms"], rel=1e-9)
    assert any("TTFT + sum of ITLs" in w for w in report.warnings)


def test_vllm_append_result_lines_are_separate_levels(raw):
    second = dict(raw, max_concurrency=8, request_rate=4.0)
    data = (json.dumps(raw) + "\n" + json.dumps(second) + "\n").encode()

    report = parse_bytes(data, filename="results.jsonl")

    assert report.variant == "bench-serve-jsonl"
    assert [lv.conditions.concurrency for lv in report.levels] == [2, 8]
    assert report.levels[1].conditions.request_rate == 4.0
    assert report.levels[1].conditions.request_rate_unlimited is False


def test_vllm_unlimited_rate_is_null_plus_a_flag_in_json():
    level = parse(*SAMPLE).to_json()["levels"][0]

    assert level["conditions"]["request_rate"] is None
    assert level["conditions"]["request_rate_unlimited"] is True
