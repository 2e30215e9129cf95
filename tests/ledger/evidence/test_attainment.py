"""Goodput against the service's SLOs, and capacity from a sweep."""

from __future__ import annotations

import json

import numpy as np
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from ledger import queries, services
from ledger.models import LoadTestReport
from tests.ledger.evidence.conftest import fixture_path, import_file

# ---------------------------------------------------------------- goodput


def _expected_goodput(ttft_ms, tpot_ms, error, ttft_slo, tpot_slo) -> float:
    """Independent of the importer: straight numpy over the file's own numbers."""
    with np.errstate(invalid="ignore"):
        good = ~error & (ttft_ms <= ttft_slo) & (np.isnan(tpot_ms) | (tpot_ms <= tpot_slo))
    return float(good.sum() / len(good))


def _vllm_requests():
    doc = json.loads(fixture_path("vllm", "vllm_c2_n20_detailed.json").read_text())
    ttft = np.array(doc["ttfts"]) * 1000.0
    latency = np.array(doc["latencies"]) * 1000.0
    out = np.array(doc["output_lens"], dtype=float)
    tpot = np.where(out > 1, (latency - ttft) / np.maximum(out - 1, 1), np.nan)
    error = np.array([bool(e) for e in doc["errors"]])
    return ttft, tpot, error


def test_goodput_of_the_vllm_sample_matches_numpy(revision, service):
    services.update_service(service, actor=None, slo_ttft_p95_ms=600, slo_tpot_ms=18)
    ttft, tpot, error = _vllm_requests()
    expected = _expected_goodput(ttft, tpot, error, 600, 18)
    assert 0 < expected < 1  # the SLOs cut through the data, so the comparison means something

    report, _ = import_file(revision, "vllm", "vllm_c2_n20_detailed.json")

    assert report.goodput == pytest.approx(expected, abs=1e-12)
    assert report.goodput_slo == {"ttft_ms": 600.0, "tpot_ms": 18.0}
    assert queries.report_goodput(report) == (report.goodput, "")


def _generated_jsonl(seed: int = 7, n: int = 2000):
    """Per-request rows in the generic format: errors, one-token answers, a long tail."""
    rng = np.random.default_rng(seed)
    ttft = rng.lognormal(mean=np.log(500), sigma=0.5, size=n).round(3)
    out = rng.integers(1, 300, size=n)
    out[rng.random(n) < 0.03] = 1
    tpot_true = rng.normal(25, 6, size=n).clip(5)
    e2e = (ttft + (out - 1) * tpot_true).round(3)
    error = rng.random(n) < 0.05
    lines = []
    for i in range(n):
        if error[i]:
            row = {"ttft_ms": None, "e2e_ms": None, "output_tokens": 0, "error": "HTTP 503"}
        else:
            row = {
                "ttft_ms": float(ttft[i]),
                "e2e_ms": float(e2e[i]),
                "output_tokens": int(out[i]),
                "error": None,
            }
        lines.append(json.dumps(row))
    tpot = np.where(out > 1, (e2e - ttft) / np.maximum(out - 1, 1), np.nan)
    return ("\n".join(lines) + "\n").encode(), ttft, tpot, error


def _import_bytes(revision, data: bytes, name: str = "requests.jsonl", workload: str = "short"):
    return services.import_loadtest_report(
        revision,
        actor=None,
        workload=workload,
        file=SimpleUploadedFile(name, data),
        filename=name,
    )


def test_goodput_counts_errors_as_misses_and_matches_numpy(revision, service):
    data, ttft, tpot, error = _generated_jsonl()
    expected = _expected_goodput(ttft, tpot, error, 800, 30)
    assert error.any()
    assert expected < _expected_goodput(ttft, tpot, np.zeros_like(error), 800, 30)

    report, _ = _import_bytes(revision, data)

    assert report.goodput == pytest.approx(expected, abs=1e-12)
    assert report.goodput_levels == [report.goodput]


def test_goodput_is_recomputed_when_the_slos_change(revision, service, django_assert_num_queries):
    data, ttft, tpot, error = _generated_jsonl(seed=11)
    report, _ = _import_bytes(revision, data)
    at_import = report.goodput

    services.update_service(
        service, actor=None, slo_ttft_p95_ms=450, slo_ttft_p99_ms=900, slo_tpot_ms=22
    )
    report = LoadTestReport.objects.with_context().get(pk=report.pk)
    with django_assert_num_queries(1):  # the per-request arrays
        value, reason = queries.report_goodput(report)

    assert reason == ""
    assert value == pytest.approx(_expected_goodput(ttft, tpot, error, 450, 22), abs=1e-12)
    assert value != at_import
    report.refresh_from_db()
    assert report.goodput == at_import  # what was recorded at import stays as recorded
    assert report.goodput_slo == {"ttft_ms": 800.0, "tpot_ms": 30.0}


def test_goodput_with_only_a_ttft_slo_ignores_tpot(revision, service):
    services.update_service(service, actor=None, slo_tpot_ms=None)
    data, ttft, _, error = _generated_jsonl(seed=3)

    report, _ = _import_bytes(revision, data)

    expected = float((~error & (np.nan_to_num(ttft, nan=np.inf) <= 800)).sum() / len(error))
    assert report.goodput == pytest.approx(expected, abs=1e-12)


def test_goodput_needs_per_request_data_for_every_slo_that_is_set(revision, service):
    # SGLang's per-request file has TTFTs but no TPOTs.
    report, _ = import_file(revision, "sglang", "sglang_c2_n16_details.jsonl")
    assert report.goodput is None
    assert queries.report_goodput(report) == (None, "the file has no per-request TPOT")

    services.update_service(service, actor=None, slo_tpot_ms=None)
    service.refresh_from_db()
    value, reason = queries.report_goodput(report, service)
    assert reason == ""
    assert 0 <= value <= 1


def test_a_summary_file_has_no_goodput(revision):
    report, _ = import_file(revision, "inference_perf", "summary_lifecycle_metrics.json")

    assert queries.report_goodput(report) == (None, "the file has no per-request data")


def test_goodput_without_latency_slos_says_so(revision, service):
    services.update_service(
        service, actor=None, slo_ttft_p95_ms=None, slo_ttft_p99_ms=None, slo_tpot_ms=None
    )
    report, _ = import_file(revision, "vllm", "vllm_c2_n20_detailed.json")

    assert report.goodput is None
    assert queries.report_goodput(report) == (None, "the service has no TTFT or TPOT SLO")


def test_goodput_of_a_one_token_answer_does_not_miss_on_tpot():
    result = queries.goodput_of(
        error=np.array([False, False, True]),
        ttft=np.array([100.0, 100.0, np.nan]),
        tpot=np.array([np.nan, 50.0, np.nan]),
        ttft_ms=200,
        tpot_ms=40,
    )
    assert result == (pytest.approx(1 / 3), "")


# ---------------------------------------------------------------- capacity


def _sweep(revision):
    report, _ = import_file(revision, "guidellm", "rate-sweep", "benchmarks.json", workload="batch")
    return LoadTestReport.objects.with_context().get(pk=report.pk)


def test_capacity_is_the_highest_rate_within_slo_of_the_guidellm_sweep(revision, service):
    # p95 TPOT of the three rates: 22.6, 22.7 and 23.9 ms; p95 TTFT under 50 ms.
    services.update_service(service, actor=None, slo_tpot_ms=23)
    report = _sweep(revision)
    otps_at_half = report.levels[1]["throughput"]["output_tokens_per_s"]

    capacity = queries.report_capacity(report)

    assert capacity["axis"] == "request_rate"
    assert capacity["level"] == "constant@0.50"
    assert capacity["load"] == 0.5
    assert capacity["output_tokens_per_s"] == otps_at_half
    assert capacity["gpu_count"] == 2
    assert capacity["gpu_hours_per_million_output_tokens"] == pytest.approx(
        2 / (otps_at_half * 3600) * 1e6
    )
    assert capacity["levels_within_slo"] == 2
    assert capacity["levels"] == 3


def test_capacity_reaches_the_top_of_the_sweep_when_every_level_is_within_slo(revision):
    report = _sweep(revision)  # TPOT SLO 30 ms

    capacity = queries.report_capacity(report)

    assert capacity["level"] == "constant@1.00"
    assert capacity["gpu_hours_per_million_output_tokens"] == pytest.approx(
        2 / (report.levels[2]["throughput"]["output_tokens_per_s"] * 3600) * 1e6
    )


def test_no_capacity_when_the_lightest_load_already_breaches(revision, service):
    services.update_service(service, actor=None, slo_tpot_ms=20)
    report = _sweep(revision)

    capacity = queries.report_capacity(report)

    assert capacity["load"] is None
    assert capacity["gpu_hours_per_million_output_tokens"] is None
    assert capacity["reason"].startswith("the lightest load, constant@0.20, is already out of SLO")
    assert "p95 TPOT 22.61 ms > 20 ms" in capacity["reason"]


def _level(name, concurrency, ttft, tpot, error_rate, otps):
    return {
        "name": name,
        "conditions": {"concurrency": concurrency, "request_rate": None, "error_rate": error_rate},
        "latency_ms": {"ttft": {"p95": ttft}, "tpot": {"p95": tpot}},
        "throughput": {"output_tokens_per_s": otps, "requests_per_s": None},
    }


SLO = {"ttft_p95_ms": 800.0, "ttft_p99_ms": None, "tpot_ms": 40.0, "error_rate_pct": 1.0}


def test_capacity_stops_at_the_first_breach_even_if_a_heavier_level_passes():
    levels = [
        _level("c8", 8, 700, 35, 0.0, 800.0),
        _level("c1", 1, 100, 20, 0.0, 100.0),
        _level("c4", 4, 500, 30, 0.02, 400.0),  # 2 % errors > 1 %
        _level("c2", 2, 300, 25, 0.0, 200.0),
    ]

    capacity = queries.capacity_from_levels(levels, SLO, gpu_count=4)

    assert capacity["axis"] == "concurrency"
    assert (capacity["level"], capacity["load"]) == ("c2", 2)
    assert capacity["gpu_hours_per_million_output_tokens"] == pytest.approx(4 / (200 * 3600) * 1e6)
    assert capacity["levels_within_slo"] == 3


def test_capacity_needs_an_slo():
    no_slo = {"ttft_p95_ms": None, "ttft_p99_ms": None, "tpot_ms": None, "error_rate_pct": None}

    capacity = queries.capacity_from_levels([_level("c1", 1, 1, 1, 0, 1)], no_slo, gpu_count=1)

    assert capacity["load"] is None
    assert capacity["reason"] == "the service has no p95 TTFT, TPOT or error-rate SLO"


def test_a_level_missing_a_measured_slo_metric_is_not_within_slo():
    level = _level("c1", 1, None, 20, 0.0, 100.0)

    assert queries.level_within_slo(level, SLO) == (False, ["p95 TTFT not measured"])


def test_a_failed_request_is_a_miss_even_with_fast_latencies():
    # GuideLLM keeps the TTFT of a request that failed mid-stream.
    result = queries.goodput_of(
        error=np.array([True, False, False, False]),
        ttft=np.array([50.0, 50.0, 900.0, 50.0]),
        tpot=np.array([10.0, 10.0, 10.0, 45.0]),
        ttft_ms=200,
        tpot_ms=40,
    )
    assert result == (0.25, "")
