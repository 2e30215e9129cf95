from __future__ import annotations

import numpy as np
import pytest

from .files import load_json, parse

SUMMARY = ("inference_perf", "summary_lifecycle_metrics.json")
STAGE = ("inference_perf", "stage_0_lifecycle_metrics.json")
PER_REQUEST = ("inference_perf", "per_request_lifecycle_metrics.json")


def test_inference_perf_summary_seconds_become_milliseconds():
    raw = load_json(*SUMMARY)["successes"]["latency"]
    report = parse(*SUMMARY)
    level = report.levels[0]

    assert (report.tool, report.format, report.variant) == (
        "inference-perf",
        "inference_perf",
        "lifecycle-summary-json",
    )
    assert report.source == "tool"
    assert level.ttft.mean == raw["time_to_first_token"]["mean"] * 1000
    assert level.ttft.p50 == raw["time_to_first_token"]["median"] * 1000
    assert level.e2e.p99 == raw["request_latency"]["p99"] * 1000
    assert level.tpot.p90 == raw["time_per_output_token"]["p90"] * 1000
    assert level.itl.max == raw["inter_token_latency"]["max"] * 1000
    assert 500 < level.ttft.mean < 1000


def test_inference_perf_counts_and_throughput():
    raw = load_json(*SUMMARY)
    cond = parse(*SUMMARY).levels[0].conditions

    assert (cond.requests, cond.successful, cond.errored) == (24, 24, 0)
    assert cond.duration_s == raw["benchmark_time_seconds"]
    assert cond.prompt_tokens.p50 == raw["successes"]["prompt_tokens"]["median"]
    assert cond.output_tokens.mean == raw["successes"]["output_tokens"]["mean"]
    assert cond.concurrency is None  # only the stage files say it


def test_inference_perf_stage_file_says_its_concurrency():
    level = parse(*STAGE).levels[0]

    assert level.conditions.concurrency == 2
    assert level.conditions.request_rate is None  # a concurrent stage: its rate is moot
    assert level.name == "concurrency 2"


def test_inference_perf_per_request_percentiles_match_numpy():
    records = load_json(*PER_REQUEST)
    starts = np.array([r["start_time"] for r in records])
    first = np.array([r["info"]["response_metrics"]["output_token_times"][0] for r in records])
    ends = np.array([r["end_time"] for r in records])

    report = parse(*PER_REQUEST)
    level = report.levels[0]

    assert (report.variant, report.source) == ("per-request-json", "computed")
    assert level.ttft.p99 == np.percentile(first - starts, 99) * 1000
    assert level.e2e.p90 == np.percentile(ends - starts, 90) * 1000
    assert (level.conditions.requests, level.conditions.errored) == (24, 0)


def test_inference_perf_per_request_file_reproduces_the_summary():
    summary = load_json(*SUMMARY)["successes"]["latency"]
    level = parse(*PER_REQUEST).levels[0]

    assert level.ttft.p99 == pytest.approx(summary["time_to_first_token"]["p99"] * 1000)
    assert level.e2e.p50 == pytest.approx(summary["request_latency"]["median"] * 1000)
    assert level.itl.p95 == pytest.approx(summary["inter_token_latency"]["p95"] * 1000)
