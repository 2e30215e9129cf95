"""The SLO matrix of a service: workload classes by metrics, live revision and candidate."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.utils import timezone

from ledger import queries, services
from ledger.models import Service
from tests.ledger.evidence.conftest import import_file
from tests.ledger.factories import RevisionFactory


@pytest.fixture
def live(service, revision):
    services.set_live_revision(service, revision, actor=None)
    return revision


@pytest.fixture
def candidate(service, live, runtime):
    return RevisionFactory(service=service, runtime=runtime, model_asset=live.model_asset)


def _fresh(service) -> Service:
    return Service.objects.get(pk=service.pk)


def _rows(block) -> dict[str, dict[str, tuple]]:
    """{workload: {metric: (word, value)}}"""
    return {
        row["workload"]: {cell["metric"]: (cell["word"], cell["value"]) for cell in row["cells"]}
        for row in block["rows"]
    }


@pytest.fixture
def evidence_set(live, candidate):
    with time_machine.travel(timezone.now() - dt.timedelta(days=100), tick=False):
        import_file(live, "guidellm", "rate-sweep", "benchmarks.json", workload="batch")
    import_file(live, "vllm", "vllm_c2_n20_detailed.json", workload="short")
    import_file(candidate, "aiperf", "profile_export.jsonl", workload="short")
    import_file(
        candidate, "inference_perf", "summary_lifecycle_metrics.json", workload="high_concurrency"
    )


def test_the_matrix_says_met_breached_stale_and_no_evidence(service, live, candidate, evidence_set):
    matrix = queries.slo_matrix(_fresh(service))

    assert [block["role"] for block in matrix["revisions"]] == ["live", "candidate"]
    assert [block["revision"].pk for block in matrix["revisions"]] == [live.pk, candidate.pk]
    assert [c["key"] for c in matrix["columns"]] == [
        "ttft_p95",
        "ttft_p99",
        "tpot_p95",
        "error_rate",
        "goodput",
        "gpu_memory_peak",
        "kv_cache_peak",
        "throughput",
        "concurrency",
        "timeout_rate",
    ]
    live_rows, candidate_rows = (_rows(block) for block in matrix["revisions"])
    assert list(live_rows) == [
        "short",
        "high_concurrency",
        "long_context",
        "batch",
        "structured",
        "streaming",
    ]

    # vLLM sample: p95 TTFT 660 ms, p99 698 ms, p95 TPOT 19.6 ms, no errors.
    short = live_rows["short"]
    assert short["ttft_p95"] == ("met", pytest.approx(659.858, abs=1e-3))
    assert short["ttft_p99"][0] == "met"
    assert short["tpot_p95"] == ("met", pytest.approx(19.6096, abs=1e-3))
    assert short["error_rate"] == ("met", 0.0)
    assert short["goodput"] == ("met", 100.0)
    assert {word for word, _ in live_rows["batch"].values()} == {"stale"}
    assert {word for word, _ in live_rows["streaming"].values()} == {"no evidence"}

    # AIPerf sample: p95 TTFT 3.3 s, p95 TPOT 64 ms.
    assert candidate_rows["short"]["ttft_p95"][0] == "breached"
    assert candidate_rows["short"]["tpot_p95"][0] == "breached"
    assert candidate_rows["short"]["goodput"][0] == "breached"
    # A summary file (p95 TTFT 909 ms, p95 TPOT 25.7 ms): percentiles yes, goodput no.
    assert candidate_rows["high_concurrency"]["ttft_p95"][0] == "breached"
    assert candidate_rows["high_concurrency"]["tpot_p95"][0] == "met"
    assert candidate_rows["high_concurrency"]["goodput"] == ("no evidence", None)


def test_cells_carry_the_slo_and_why(service, live, candidate, evidence_set):
    matrix = queries.slo_matrix(_fresh(service))

    live_block, candidate_block = matrix["revisions"]
    short = {c["metric"]: c for c in live_block["rows"][0]["cells"]}
    assert short["ttft_p95"]["slo"] == 800
    assert short["error_rate"]["slo"] == 1.0
    assert short["goodput"]["slo"] == 95.0
    batch = next(r for r in live_block["rows"] if r["workload"] == "batch")
    assert batch["status"].status == "stale"
    assert "100 days ago" in batch["cells"][0]["note"]
    summary = next(r for r in candidate_block["rows"] if r["workload"] == "high_concurrency")
    assert summary["cells"][4]["note"] == "the file has no per-request data"


def test_an_unset_slo_reads_no_slo(service, live, evidence_set):
    services.update_service(service, actor=None, slo_error_rate_pct=None, slo_ttft_p99_ms=None)

    live_rows = _rows(queries.slo_matrix(_fresh(service))["revisions"][0])

    assert live_rows["short"]["error_rate"] == ("no SLO", 0.0)
    assert live_rows["short"]["ttft_p99"][0] == "no SLO"
    assert live_rows["short"]["ttft_p95"][0] == "met"


def test_a_current_report_wins_over_a_newer_stale_one(service, live, runtime):
    import_file(live, "vllm", "vllm_c2_n20_detailed.json", workload="short")
    # Newer, but measured on other hardware than the runtime now has: stale.
    report, _ = import_file(live, "aiperf", "profile_export.jsonl", workload="short")
    report.hardware = {**report.hardware, "gpu_count": 8}
    report.save(update_fields=["hardware"])

    short = _rows(queries.slo_matrix(_fresh(service))["revisions"][0])["short"]

    assert short["ttft_p95"] == ("met", pytest.approx(659.858, abs=1e-3))


def test_goodput_follows_slos_changed_after_import(service, live, evidence_set):
    services.update_service(service, actor=None, slo_ttft_p95_ms=600, slo_tpot_ms=18)

    short = _rows(queries.slo_matrix(_fresh(service))["revisions"][0])["short"]

    assert short["goodput"][0] == "breached"
    assert 0 < short["goodput"][1] < 95


def test_the_matrix_takes_a_constant_number_of_queries(
    service, live, candidate, evidence_set, django_assert_num_queries
):
    fresh = _fresh(service)
    # The two revisions; their reports.
    with django_assert_num_queries(2):
        queries.slo_matrix(fresh)

    import_file(live, "sglang", "sglang_c2_n16_details.jsonl", workload="streaming")
    import_file(candidate, "guidellm", "concurrency2", "benchmarks.json", workload="batch")
    import_file(candidate, "generic", "requests.jsonl", workload="structured")
    with django_assert_num_queries(2):
        queries.slo_matrix(fresh)

    # New SLOs: one more query fetches the per-request arrays of every report at once.
    services.update_service(service, actor=None, slo_ttft_p95_ms=700)
    fresh = _fresh(service)
    with django_assert_num_queries(3):
        matrix = queries.slo_matrix(fresh)
    assert len(matrix["revisions"]) == 2


def test_without_a_newer_revision_there_is_no_candidate(service, revision):
    newest = RevisionFactory(
        service=service, runtime=revision.runtime, model_asset=revision.model_asset
    )
    services.set_live_revision(service, newest, actor=None)

    matrix = queries.slo_matrix(_fresh(service))

    assert [(b["role"], b["revision"].pk) for b in matrix["revisions"]] == [("live", newest.pk)]


def test_without_a_live_revision_the_newest_is_the_candidate(service, revision):
    newest = RevisionFactory(
        service=service, runtime=revision.runtime, model_asset=revision.model_asset
    )

    matrix = queries.slo_matrix(_fresh(service))

    assert [(b["role"], b["revision"].pk) for b in matrix["revisions"]] == [
        ("candidate", newest.pk)
    ]
