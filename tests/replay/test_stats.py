"""Percentiles and run aggregates."""

from __future__ import annotations

import numpy as np
import pytest

from replay.client import ReplayResult
from replay.stats import aggregate, summarize


def test_summary_uses_linear_interpolation_like_vllm_bench():
    values = [12.0, 15.0, 11.0, 40.0, 13.0, 14.0, 90.0]

    summary = summarize(values)

    assert summary["count"] == 7
    assert summary["p50"] == 14.0
    assert summary["p95"] == float(np.percentile(values, 95))
    assert summary["p99"] == pytest.approx(87.0)  # 40 + 0.94 * (90 - 40)
    assert (summary["min"], summary["max"]) == (11.0, 90.0)


def test_empty_summary_has_no_numbers():
    summary = summarize([])

    assert summary["count"] == 0
    assert summary["p95"] is None


def test_aggregate_counts_errors_and_summarizes_successes_only():
    results = [
        ReplayResult(
            ttft_ms=100.0, tpot_ms=10.0, e2e_ms=400.0, itl_ms=[9.0, 11.0], output_tokens=3
        ),
        ReplayResult(ttft_ms=200.0, tpot_ms=20.0, e2e_ms=600.0, itl_ms=[20.0], output_tokens=2),
        ReplayResult(outcome="error", error_code="timeout_idle", ttft_ms=5000.0),
        ReplayResult(outcome="error", error_code="http_500"),
        ReplayResult(outcome="error", error_code="http_500"),
    ]

    run = aggregate(results)

    assert (run["requests"], run["ok"], run["errors"]) == (5, 2, 3)
    assert run["error_codes"] == {"http_500": 2, "timeout_idle": 1}
    assert run["ttft_ms"]["max"] == 200.0
    assert run["itl_ms"]["count"] == 3
    assert run["output_tokens"] == 5


def test_result_dict_summarizes_itl():
    result = ReplayResult(itl_ms=[10.0, 12.0, 14.0])

    assert result.to_dict()["itl_ms_summary"]["p50"] == 12.0
    assert "itl_ms" not in result.to_dict()
    assert result.to_dict(itl="full")["itl_ms"] == [10.0, 12.0, 14.0]
