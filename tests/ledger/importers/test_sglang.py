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


def _successful(raw: dict) -> tuple[np.ndarray, np.ndarray]:
    """TTFTs and chunk gaps (seconds) of the successful requests, read from the raw JSON."""
    ok = [not error for error in raw["errors"]]
    ttfts = np.array([t for t, good in zip(raw["ttfts"], ok, strict=True) if good])
    gaps = np.array([g for row, good in zip(raw["itls"], ok, strict=True) if good for g in row])
    return ttfts, gaps


def test_sglang_ttft_and_itl_are_recomputed_from_the_per_request_arrays(raw):
    ttfts, gaps = _successful(raw)
    # Spoil the tool's own numbers: what the level says must come from the arrays.
    for key in ("median", "p90", "p95", "p99"):
        raw[f"{key}_ttft_ms"] = raw[f"{key}_itl_ms"] = 1.0

    level = parse_bytes(json.dumps(raw).encode(), filename="run.jsonl").levels[0]

    # In seconds, then times 1000: the order SGLang computes its own in.
    for q in (50, 95, 99):
        assert getattr(level.ttft, f"p{q}") == np.percentile(ttfts, q) * 1000
        assert getattr(level.itl, f"p{q}") == np.percentile(gaps, q) * 1000
    # SGLang writes no max; the arrays have one.
    assert level.ttft.max == ttfts.max() * 1000
    assert level.itl.max == gaps.max() * 1000
    assert len(gaps) == 16 * 31
    # No per-request e2e: TPOT and e2e are still the tool's.
    assert level.e2e.p99 == raw["p99_e2e_latency_ms"]
    assert level.tpot.p95 == raw["p95_tpot_ms"]
    assert level.source == "tool"


def test_sglang_recomputed_percentiles_agree_with_the_tools_own(raw):
    level = parse(*SAMPLE).levels[0]

    # SGLang computes np.percentile over the successful requests in seconds and
    # multiplies by 1000, as we do: in this file every number is equal to the bit.
    # approx still, because its p50 is np.median (the mean of the two middle
    # values), which can differ from interpolating halfway in the last bit.
    for ours, theirs in (("p50", "median"), ("p90", "p90"), ("p95", "p95"), ("p99", "p99")):
        assert getattr(level.ttft, ours) == pytest.approx(raw[f"{theirs}_ttft_ms"], rel=1e-12)
        assert getattr(level.itl, ours) == pytest.approx(raw[f"{theirs}_itl_ms"], rel=1e-12)
    assert level.ttft.mean == pytest.approx(raw["mean_ttft_ms"], rel=1e-12)
    assert level.itl.mean == pytest.approx(raw["mean_itl_ms"], rel=1e-12)


def test_sglang_failed_request_is_left_out_of_the_recomputed_percentiles(raw):
    # What SGLang writes for a failed request: TTFT 0, no gaps, an error.
    raw["errors"][3] = "HTTP 500"
    raw["ttfts"][3] = 0.0
    raw["itls"][3] = []
    ttfts, gaps = _successful(raw)

    level = parse_bytes(json.dumps(raw).encode(), filename="run.jsonl").levels[0]

    assert level.conditions.errored == 1
    assert level.ttft.p50 == np.percentile(ttfts, 50) * 1000
    assert level.itl.p99 == np.percentile(gaps, 99) * 1000
    assert len(ttfts) == 15


def test_sglang_without_per_request_arrays_keeps_the_tools_percentiles(raw):
    del raw["ttfts"], raw["itls"]

    level = parse_bytes(json.dumps(raw).encode(), filename="run.jsonl").levels[0]

    assert level.ttft.p99 == raw["p99_ttft_ms"]
    assert level.itl.p95 == raw["p95_itl_ms"]
    assert level.ttft.max is None
    assert level.requests is None
