"""From stored reports to the plain data the charts take."""

from __future__ import annotations

import datetime as dt

import time_machine
from django.utils import timezone

from ledger import charts, queries
from ledger.models import LoadTestReport
from tests.ledger.evidence.conftest import import_file


def test_latency_points_take_the_newest_report_of_each_workload(revision, service):
    with time_machine.travel(timezone.now() - dt.timedelta(days=120), tick=False):
        import_file(revision, "guidellm", "concurrency2", "benchmarks.json", workload="batch")
        import_file(revision, "aiperf", "profile_export.jsonl", workload="short")
    newer, _ = import_file(revision, "vllm", "vllm_c2_n20_detailed.json", workload="short")

    points = queries.latency_points(LoadTestReport.objects.with_context().filter(revision=revision))

    assert [(p["workload"], p["status"]) for p in points] == [
        ("short", "current"),
        ("batch", "stale"),
    ]
    assert points[0]["ttft_p95_ms"] == newer.ttft_p95_ms
    assert points[0]["tpot_p50_ms"] == newer.results["levels"][0]["latency_ms"]["tpot"]["p50"]
    rows = charts.latency_by_workload_rows(points, queries.service_slo(service))
    assert rows[0]["slo_ttft_p95_ms"] == 800.0


def test_level_points_of_the_guidellm_sweep(revision, service):
    report, _ = import_file(revision, "guidellm", "rate-sweep", "benchmarks.json", workload="batch")

    points = queries.level_points(report, {**queries.service_slo(service), "tpot_ms": 23.0})

    assert [(p["name"], p["load"], p["within_slo"]) for p in points] == [
        ("constant@0.20", 0.2, True),
        ("constant@0.50", 0.5, True),
        ("constant@1.00", 1.0, False),
    ]
    assert points[2]["output_tokens_per_s"] == report.levels[2]["throughput"]["output_tokens_per_s"]
    rows = charts.throughput_latency_rows(points)
    assert [r["region"] for r in rows] == [
        "latency-sensitive",
        "latency-sensitive",
        "throughput-first",
    ]


def test_ttft_cdf_series_only_where_there_is_per_request_data(revision):
    detailed, _ = import_file(revision, "vllm", "vllm_c2_n20_detailed.json")
    summary, _ = import_file(revision, "inference_perf", "summary_lifecycle_metrics.json")

    series = queries.ttft_cdf_series(detailed)

    assert [s["label"] for s in series] == ["concurrency 2"]
    assert len(series[0]["points"]) == 20
    assert series[0]["points"][-1][1] == 1.0
    assert queries.ttft_cdf_series(summary) == []
