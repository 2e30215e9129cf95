from __future__ import annotations

import json
import math

import numpy as np
import pytest

from ledger.importers import ReportFormatError

from .files import fixture, parse, parse_bytes

SAMPLE = ("sglang", "sglang_c2_n16_details.jsonl")


@pytest.fixture
def raw() -> dict:
    # The standard library reads the bare Infinity SGLang writes; orjson would not.
    return json.loads(fixture(*SAMPLE).read_text().splitlines()[0])


def test_sglang_line_with_bare_infinity_is_read_as_an_unlimited_rate():
    assert b"Infinity" in fixture(*SAMPLE).read_bytes()

    report = parse(*SAMPLE)
    cond = report.levels[0].conditions

    assert (report.tool, report.format, report.variant) == (
        "sglang",
        "sglang",
        "bench-serving-jsonl",
    )
    assert cond.request_rate is None
    assert cond.request_rate_unlimited is True
    assert cond.concurrency == 2
    assert (cond.requests, cond.successful, cond.errored) == (16, 16, 0)


def test_sglang_latencies_are_the_tools_own_summary(raw):
    report = parse(*SAMPLE)
    level = report.levels[0]

    assert report.source == level.source == "tool"
    assert level.ttft.p99 == raw["p99_ttft_ms"]
    assert level.e2e.p95 == raw["p95_e2e_latency_ms"]
    assert level.itl.p90 == raw["p90_itl_ms"]
    assert level.tpot.mean == raw["mean_tpot_ms"]
    # No p50 keys: the median stands for it. No max at all.
    assert level.ttft.p50 == raw["median_ttft_ms"]
    assert level.e2e.max is None
    assert level.throughput.total_tokens_per_s == raw["total_throughput"]


def test_sglang_keeps_per_request_ttfts_in_ms_for_the_cdf(raw):
    level = parse(*SAMPLE).levels[0]

    assert level.requests is not None
    assert np.array_equal(level.requests.ttft_ms, np.array(raw["ttfts"]) * 1000)
    assert level.requests.e2e_ms is None  # the file has no per-request e2e
    # SGLang's own percentiles are numpy's too: the kept TTFTs reproduce them.
    assert np.percentile(level.requests.ttft_ms, 99) == pytest.approx(raw["p99_ttft_ms"])


def test_sglang_output_lens_are_not_taken_as_generated_tokens(raw):
    cond = parse(*SAMPLE).levels[0].conditions

    assert cond.output_tokens.mean == raw["total_output_tokens"] / raw["completed"]
    assert cond.output_tokens.p50 is None


def test_sglang_runs_on_several_lines_are_several_levels(raw):
    text = fixture(*SAMPLE).read_text().splitlines()[0]
    second = text.replace('"max_concurrency": 2', '"max_concurrency": 4')

    report = parse_bytes(f"{text}\n{second}\n".encode(), filename="runs.jsonl")

    assert [lv.conditions.concurrency for lv in report.levels] == [2, 4]


def test_sglang_nan_percentile_is_refused_naming_the_line_and_key():
    text = fixture(*SAMPLE).read_text().splitlines()[0]
    broken = text.replace('"p99_ttft_ms": 1737.3181022501512', '"p99_ttft_ms": NaN')
    assert broken != text

    with pytest.raises(ReportFormatError) as caught:
        parse_bytes(f"{text}\n{broken}\n".encode(), filename="runs.jsonl")

    assert caught.value.location == "line 2: p99_ttft_ms"
    assert "NaN" in caught.value.message
    assert math.isnan(json.loads(broken)["p99_ttft_ms"])
