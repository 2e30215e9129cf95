from __future__ import annotations

import json

import numpy as np
import pytest

from .files import load_json, parse, parse_bytes

CONCURRENT = ("guidellm", "concurrency2", "benchmarks.json")
SWEEP = ("guidellm", "rate-sweep", "benchmarks.json")
SWEEP_CSV = ("guidellm", "rate-sweep", "benchmarks.csv")
CONCURRENT_CSV = ("guidellm", "concurrency2", "benchmarks.csv")


def _successful(raw: dict, i: int = 0) -> list[dict]:
    return raw["benchmarks"][i]["requests"]["successful"]


def test_guidellm_report_says_its_tool_and_version():
    report = parse(*CONCURRENT)

    assert (report.tool, report.tool_version) == ("guidellm", "0.8.1")
    assert (report.format, report.variant) == ("guidellm", "benchmarks-json")
    assert report.source == "computed"
    assert report.meta["model"] == "gemma-3-270m"


def test_guidellm_concurrent_benchmark_conditions():
    raw = load_json(*CONCURRENT)
    level = parse(*CONCURRENT).levels[0]
    cond = level.conditions

    assert level.name == "concurrent@2"
    assert cond.concurrency == 2
    assert cond.request_rate is None
    assert (cond.successful, cond.errored, cond.incomplete) == (24, 0, 0)
    assert cond.requests == raw["benchmarks"][0]["metrics"]["request_totals"]["total"]
    assert cond.duration_s == raw["benchmarks"][0]["duration"]
    assert cond.prompt_tokens.mean == 64
    assert cond.output_tokens.p90 == 32


def test_guidellm_percentiles_match_numpy_on_the_request_records():
    raw = load_json(*CONCURRENT)
    records = _successful(raw)
    level = parse(*CONCURRENT).levels[0]
    ttft = np.array([r["time_to_first_token_ms"] for r in records])
    e2e = np.array([r["request_latency"] for r in records]) * 1000  # seconds in the file
    tokens = np.array([r["output_tokens"] for r in records])

    assert level.ttft.p99 == np.percentile(ttft, 99)
    assert level.ttft.p50 == np.percentile(ttft, 50)
    assert level.e2e.p95 == np.percentile(e2e, 95)
    assert level.tpot.p90 == np.percentile((e2e - ttft) / (tokens - 1), 90)
    # GuideLLM's own p99 is not numpy's interpolation; ours is.
    assert (
        level.ttft.p99
        != raw["benchmarks"][0]["metrics"]["time_to_first_token_ms"]["successful"]["percentiles"][
            "p99"
        ]
    )


def test_guidellm_request_latency_seconds_become_milliseconds():
    raw = load_json(*CONCURRENT)
    tool_mean_s = raw["benchmarks"][0]["metrics"]["request_latency"]["successful"]["mean"]

    level = parse(*CONCURRENT).levels[0]

    assert level.e2e.mean == pytest.approx(tool_mean_s * 1000, rel=1e-9)
    # TTFT was already ms: same mean as GuideLLM's.
    tool_ttft = raw["benchmarks"][0]["metrics"]["time_to_first_token_ms"]["successful"]["mean"]
    assert level.ttft.mean == pytest.approx(tool_ttft, rel=1e-9)


def test_guidellm_rate_sweep_is_three_levels_each_with_its_own_rate():
    raw = load_json(*SWEEP)
    report = parse(*SWEEP)

    assert len(report.levels) == 3
    rates = [b["config"]["strategy"]["rate"] for b in raw["benchmarks"]]
    assert [lv.conditions.request_rate for lv in report.levels] == rates == [0.2, 0.5, 1.0]
    assert [lv.name for lv in report.levels] == ["constant@0.20", "constant@0.50", "constant@1.00"]
    assert all(lv.conditions.concurrency is None for lv in report.levels)
    for level, bench in zip(report.levels, raw["benchmarks"], strict=True):
        assert level.conditions.requests == bench["metrics"]["request_totals"]["total"]
        assert level.conditions.duration_s == bench["duration"]
        ttft = [r["time_to_first_token_ms"] for r in bench["requests"]["successful"]]
        assert level.ttft.p95 == np.percentile(ttft, 95)


def test_guidellm_counts_come_from_the_file_not_from_the_requested_count():
    raw = load_json(*CONCURRENT)
    bench = raw["benchmarks"][0]
    failed = bench["requests"]["successful"].pop(5)
    failed["error"] = "ReadTimeout"
    bench["requests"]["errored"] = [failed]
    dropped = bench["requests"]["successful"].pop()  # a request that never finished
    bench["requests"]["incomplete"] = [dropped]
    bench["metrics"]["request_totals"] = {
        "successful": 22,
        "errored": 1,
        "incomplete": 1,
        "total": 24,
    }

    level = parse_bytes(json.dumps(raw).encode()).levels[0]
    ttft = [r["time_to_first_token_ms"] for r in bench["requests"]["successful"]]

    assert (level.conditions.successful, level.conditions.errored) == (22, 1)
    assert level.conditions.incomplete == 1
    assert level.conditions.requests == 24
    assert level.conditions.error_rate == pytest.approx(1 / 24)
    assert level.ttft.p99 == np.percentile(ttft, 99)
    assert level.requests is not None and int(level.requests.error.sum()) == 1


def test_guidellm_sampled_records_fall_back_to_the_tools_numbers():
    raw = load_json(*CONCURRENT)
    bench = raw["benchmarks"][0]
    bench["requests"]["successful"] = bench["requests"]["successful"][:10]
    tool = bench["metrics"]["time_to_first_token_ms"]["successful"]

    report = parse_bytes(json.dumps(raw).encode())
    level = report.levels[0]

    assert report.source == level.source == "tool"
    assert level.ttft.p99 == tool["percentiles"]["p99"]
    assert level.ttft.max == tool["max"]
    # GuideLLM's inter_token_latency is our TPOT; request_latency is seconds.
    itl = bench["metrics"]["inter_token_latency_ms"]["successful"]["percentiles"]["p50"]
    assert level.tpot.p50 == itl
    e2e = bench["metrics"]["request_latency"]["successful"]["percentiles"]["p90"]
    assert level.e2e.p90 == e2e * 1000
    assert any("10 of 24" in w for w in report.warnings)


def test_guidellm_csv_sweep_is_three_levels_with_the_tools_numbers():
    raw = load_json(*SWEEP)
    report = parse(*SWEEP_CSV)

    assert (report.variant, report.source, report.tool_version) == (
        "benchmarks-csv",
        "tool",
        "0.8.1",
    )
    assert [lv.name for lv in report.levels] == ["constant@0.20", "constant@0.50", "constant@1.00"]
    assert [lv.conditions.request_rate for lv in report.levels] == [0.2, 0.5, 1.0]
    for level, bench in zip(report.levels, raw["benchmarks"], strict=True):
        ttft = bench["metrics"]["time_to_first_token_ms"]["successful"]
        e2e = bench["metrics"]["request_latency"]["successful"]
        assert level.ttft.p50 == pytest.approx(ttft["median"])
        assert level.ttft.p99 == pytest.approx(ttft["percentiles"]["p99"])
        assert level.e2e.p95 == pytest.approx(e2e["percentiles"]["p95"] * 1000)
        assert level.conditions.requests == bench["metrics"]["request_totals"]["total"]
        assert level.conditions.duration_s == pytest.approx(bench["duration"])


def test_guidellm_csv_concurrent_level_reads_the_strategy_text():
    level = parse(*CONCURRENT_CSV).levels[0]

    assert level.name == "concurrent@2"
    assert level.conditions.concurrency == 2
    assert (level.conditions.successful, level.conditions.errored) == (24, 0)
