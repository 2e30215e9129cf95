from __future__ import annotations

import json

import numpy as np
import pytest

from .files import load_json, parse, parse_bytes

PERF_ANALYZER = ("genai_perf", "profile_export.json")
SUMMARY = ("genai_perf", "profile_export_genai_perf.json")
SUMMARY_CSV = ("genai_perf", "profile_export_genai_perf.csv")


def _content_times(request: dict) -> list[int]:
    """Timestamps of the frames that carry text (independent of the importer)."""
    kept = []
    for stamp, out in zip(request["response_timestamps"], request["response_outputs"], strict=True):
        body = out["response"].strip().removeprefix("data: ")
        if body == "[DONE]":
            continue
        if json.loads(body)["choices"][0]["delta"].get("content"):
            kept.append(stamp)
    return kept


def test_perf_analyzer_export_says_its_version_and_load():
    report = parse(*PERF_ANALYZER)
    cond = report.levels[0].conditions

    assert (report.tool, report.tool_version) == ("perf_analyzer", "2.51.0")
    assert (report.format, report.variant, report.source) == (
        "genai_perf",
        "perf-analyzer-json",
        "computed",
    )
    assert cond.concurrency == 2
    assert (cond.requests, cond.successful, cond.errored) == (24, 24, 0)


def test_perf_analyzer_ns_timestamps_become_ms_percentiles_over_content_frames():
    requests = load_json(*PERF_ANALYZER)["experiments"][0]["requests"]
    ttft = np.array([_content_times(r)[0] - r["timestamp"] for r in requests], dtype=float)
    e2e = np.array([_content_times(r)[-1] - r["timestamp"] for r in requests], dtype=float)

    level = parse(*PERF_ANALYZER).levels[0]

    assert level.ttft.p99 == np.percentile(ttft, 99) * 1e-6
    assert level.e2e.p50 == np.percentile(e2e, 50) * 1e-6
    assert 300 < level.ttft.p50 < 3000  # ms, not ns or s


def test_perf_analyzer_drops_role_only_and_final_frames_as_genai_perf_does():
    summary = load_json(*SUMMARY)
    level = parse(*PERF_ANALYZER).levels[0]

    # 35 frames per request: role-only, 32 tokens, finish_reason, [DONE].
    assert level.conditions.output_tokens.mean == 32
    assert level.ttft.p99 == pytest.approx(summary["time_to_first_token"]["p99"], rel=1e-9)
    assert level.e2e.mean == pytest.approx(summary["request_latency"]["avg"], rel=1e-9)
    assert level.tpot.p90 == pytest.approx(summary["inter_token_latency"]["p90"], rel=1e-6)
    assert level.throughput.requests_per_s == pytest.approx(
        summary["request_throughput"]["avg"], rel=1e-6
    )


def test_perf_analyzer_itl_is_the_gaps_between_content_frames():
    requests = load_json(*PERF_ANALYZER)["experiments"][0]["requests"]
    gaps = np.concatenate([np.diff(_content_times(r)) for r in requests]).astype(float)

    level = parse(*PERF_ANALYZER).levels[0]

    assert level.itl.p95 == pytest.approx(np.percentile(gaps, 95) * 1e-6, rel=1e-12)
    assert len(gaps) == 24 * 31


def test_perf_analyzer_request_without_content_is_a_failure():
    raw = load_json(*PERF_ANALYZER)
    raw["experiments"][0]["requests"][0]["response_timestamps"] = []
    raw["experiments"][0]["requests"][0]["response_outputs"] = []

    level = parse_bytes(json.dumps(raw).encode()).levels[0]

    assert (level.conditions.successful, level.conditions.errored) == (23, 1)


def test_genai_perf_summary_json_keeps_the_tools_numbers():
    summary = load_json(*SUMMARY)
    report = parse(*SUMMARY)
    level = report.levels[0]

    assert (report.tool, report.variant, report.source) == ("genai-perf", "summary-json", "tool")
    assert level.conditions.concurrency == 2
    assert level.conditions.successful == 24
    assert level.ttft.p99 == summary["time_to_first_token"]["p99"]
    assert level.tpot.p50 == summary["inter_token_latency"]["p50"]
    assert level.itl.p50 is None
    assert report.meta["model"] == "gemma-3-270m"


def test_genai_perf_csv_numbers_with_thousands_separators_are_read():
    level = parse(*SUMMARY_CSV).levels[0]

    assert level.ttft.mean == 1565.62  # written "1,565.62"
    assert level.e2e.max == 2717.78  # written "2,717.78"
    assert level.tpot.p99 == 29.98
    assert level.conditions.successful == 24
    assert level.throughput.output_tokens_per_s == 26.33
