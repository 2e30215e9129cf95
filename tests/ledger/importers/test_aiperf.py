from __future__ import annotations

import json

import numpy as np
import pytest

from .files import fixture, load_json, load_jsonl, parse, parse_bytes

RECORDS = ("aiperf", "profile_export.jsonl")
SUMMARY = ("aiperf", "profile_export_aiperf.json")
SUMMARY_CSV = ("aiperf", "profile_export_aiperf.csv")


def _profiling() -> list[dict]:
    return [r for r in load_jsonl(*RECORDS) if r["metadata"]["benchmark_phase"] == "profiling"]


def _values(records: list[dict], metric: str) -> np.ndarray:
    return np.array([r["metrics"][metric]["value"] for r in records])


def test_aiperf_records_leave_out_the_warmup_requests():
    assert len(load_jsonl(*RECORDS)) == 26

    report = parse(*RECORDS)
    cond = report.levels[0].conditions

    assert (report.tool, report.format, report.variant) == ("aiperf", "aiperf", "records-jsonl")
    assert report.source == "computed"
    assert (cond.requests, cond.successful, cond.errored) == (24, 24, 0)
    assert report.warnings == ["warm-up records left out: 2"]


def test_aiperf_record_percentiles_match_numpy_on_the_records():
    records = _profiling()
    level = parse(*RECORDS).levels[0]
    ttft = _values(records, "time_to_first_token")
    e2e = _values(records, "request_latency")
    gaps = np.concatenate([r["metrics"]["inter_chunk_latency"]["value"] for r in records])

    assert level.ttft.p99 == np.percentile(ttft, 99)
    assert level.ttft.p90 == np.percentile(ttft, 90)
    assert level.e2e.p50 == np.percentile(e2e, 50)
    assert level.itl.p95 == np.percentile(gaps, 95)
    assert level.ttft.max == ttft.max()


def test_aiperf_inter_token_latency_is_our_tpot():
    records = _profiling()
    level = parse(*RECORDS).levels[0]

    theirs = _values(records, "inter_token_latency")
    assert np.allclose(level.requests.tpot_ms, theirs, rtol=1e-9)
    assert level.tpot.p99 == pytest.approx(np.percentile(theirs, 99), rel=1e-9)


def test_aiperf_records_reproduce_the_summary_of_the_same_run():
    summary = load_json(*SUMMARY)
    level = parse(*RECORDS).levels[0]

    # AIPerf's percentiles are numpy's too: recomputation lands on the summary.
    assert level.ttft.p99 == pytest.approx(summary["time_to_first_token"]["p99"], rel=1e-9)
    assert level.e2e.p95 == pytest.approx(summary["request_latency"]["p95"], rel=1e-9)
    assert level.itl.p99 == pytest.approx(summary["inter_chunk_latency"]["p99"], rel=1e-9)
    assert level.conditions.duration_s == pytest.approx(
        summary["benchmark_duration"]["avg"], rel=1e-3
    )
    assert level.throughput.output_tokens_per_s == pytest.approx(
        summary["output_token_throughput"]["avg"], rel=1e-3
    )


def test_aiperf_failed_record_counts_as_an_error_not_a_latency():
    lines = fixture(*RECORDS).read_text().splitlines()
    failed = json.loads(lines[5])
    failed["error"] = {"code": 500, "type": "InternalServerError", "message": "boom"}
    failed["metrics"] = {"error_isl": {"value": 63, "unit": "tokens"}}
    lines[5] = json.dumps(failed)

    level = parse_bytes("\n".join(lines).encode(), filename="profile_export.jsonl").levels[0]
    ok = [r for i, r in enumerate(load_jsonl(*RECORDS)) if i != 5]
    ok = [r for r in ok if r["metadata"]["benchmark_phase"] == "profiling"]

    assert (level.conditions.successful, level.conditions.errored) == (23, 1)
    assert level.ttft.p50 == np.percentile(_values(ok, "time_to_first_token"), 50)


def test_aiperf_summary_json_keeps_the_tools_numbers_and_version():
    summary = load_json(*SUMMARY)
    report = parse(*SUMMARY)
    level = report.levels[0]

    assert (report.variant, report.source, report.tool_version) == (
        "summary-json",
        "tool",
        "0.13.0",
    )
    assert level.conditions.concurrency == 2  # the profiling phase, not the warm-up
    assert (level.conditions.successful, level.conditions.errored) == (24, 0)
    assert level.ttft.p99 == summary["time_to_first_token"]["p99"]
    assert level.tpot.mean == summary["inter_token_latency"]["avg"]
    assert level.e2e.max == summary["request_latency"]["max"]
    assert level.throughput.requests_per_s == summary["request_throughput"]["avg"]
    assert report.warnings == ["warm-up requests left out by AIPerf: 2"]


def test_aiperf_summary_csv_reads_units_from_names_and_skips_the_gpu_table():
    report = parse(*SUMMARY_CSV)
    level = report.levels[0]

    assert (report.variant, report.source) == ("summary-csv", "tool")
    assert level.ttft.p99 == 3473.17
    assert level.e2e.p50 == 3782.91
    assert level.itl.p99 == 182.09
    assert level.conditions.duration_s == 45.61
    assert (level.conditions.successful, level.conditions.errored) == (24, 0)
    assert level.throughput.total_tokens_per_s == 49.99
