from __future__ import annotations

import json
import math

import numpy as np
import pytest

from ledger.importers import cdf_points

from .files import parse, parse_bytes

ALL_SAMPLES = [
    ("vllm", "vllm_c2_n20_detailed.json"),
    ("sglang", "sglang_c2_n16_details.jsonl"),
    ("guidellm", "rate-sweep", "benchmarks.json"),
    ("guidellm", "rate-sweep", "benchmarks.csv"),
    ("aiperf", "profile_export.jsonl"),
    ("aiperf", "profile_export_aiperf.json"),
    ("genai_perf", "profile_export.json"),
    ("genai_perf", "profile_export_genai_perf.csv"),
    ("inference_perf", "per_request_lifecycle_metrics.json"),
    ("inference_perf", "stage_0_lifecycle_metrics.json"),
    ("generic", "requests.csv"),
]


@pytest.mark.parametrize("parts", ALL_SAMPLES, ids="/".join)
def test_to_json_is_strict_json_with_plain_types(parts):
    report = parse(*parts)

    data = report.to_json(include_requests=True)
    text = json.dumps(data, allow_nan=False)  # refuses NaN, Infinity and numpy types

    assert json.loads(text) == data
    assert data["tool"] == report.tool
    assert len(data["levels"]) == len(report.levels)


def test_to_json_shape_of_a_level():
    data = parse("vllm", "vllm_c2_n20_detailed.json").to_json()
    level = data["levels"][0]

    assert set(data) == {
        "schema",
        "filename",
        "tool",
        "tool_version",
        "format",
        "variant",
        "source",
        "meta",
        "warnings",
        "levels",
    }
    assert set(level) == {
        "name",
        "source",
        "conditions",
        "latency_ms",
        "throughput",
        "ttft_cdf",
    }
    assert set(level["latency_ms"]) == {"ttft", "tpot", "itl", "e2e"}
    assert set(level["latency_ms"]["ttft"]) == {"mean", "p50", "p90", "p95", "p99", "max"}
    assert level["conditions"]["concurrency"] == 2
    assert level["latency_ms"]["ttft"]["p99"] == 697.6339513300627
    assert level["ttft_cdf"][-1] == [level["latency_ms"]["ttft"]["max"], 1.0]


def test_to_json_per_request_arrays_turn_nan_into_null():
    data = b'{"ttft_ms": 10, "e2e_ms": 50, "output_tokens": 5}\n{"error": "boom"}\n'

    requests = parse_bytes(data, filename="r.jsonl").to_json(include_requests=True)["levels"][0][
        "requests"
    ]

    assert requests["ttft_ms"] == [10.0, None]
    assert requests["tpot_ms"] == [10.0, None]
    assert requests["error"] == [False, True]


def test_to_json_leaves_requests_out_unless_asked():
    level = parse("generic", "requests.csv").to_json()["levels"][0]

    assert "requests" not in level
    assert level["ttft_cdf"] is not None


def test_cdf_points_is_the_empirical_cdf_of_small_samples():
    points = cdf_points([3.0, 1.0, float("nan"), 2.0])

    assert points == [(1.0, 1 / 3), (2.0, 2 / 3), (3.0, 1.0)]


def test_cdf_points_downsamples_keeping_both_tails():
    values = np.random.default_rng(7).lognormal(size=100_000)

    points = cdf_points(values, max_points=200)

    assert len(points) == 200
    assert points[0] == (values.min(), 1 / 100_000)
    assert points[-1] == (values.max(), 1.0)
    xs = [x for x, _ in points]
    fractions = [f for _, f in points]
    assert xs == sorted(xs)
    assert fractions == sorted(fractions)
    # Each kept point is exact: the share of values at or below it.
    x, f = points[100]
    assert f == pytest.approx((values <= x).mean())


def test_cdf_points_of_nothing_is_empty():
    assert cdf_points([]) == []
    assert cdf_points([math.nan]) == []
