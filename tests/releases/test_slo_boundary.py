"""The `load_evidence` gate on throughput, concurrency and timeout SLOs (table 6-2's
performance boundary): a minimum is missed when the report is below it, and the gate
says so in those words; the timeout SLO no report can measure is named, not held against
each report. The world (tests/releases/factories.py) sets none of these SLOs."""

from __future__ import annotations

from decimal import Decimal

import pytest

from ledger import queries as ledger_queries
from ledger import services as ledger_services
from ledger.models import LoadTestReport
from releases.governance import gates
from releases.models import Release

pytestmark = pytest.mark.django_db

WORKLOADS = ("short", "high_concurrency", "long_context", "streaming")


def gate(release: Release) -> tuple[str, str]:
    result = gates.assess(release).gate("load_evidence")
    assert result is not None
    return result["status"], result["reason"]


def measured(world, **columns) -> None:
    """Every candidate report measured the same columns."""
    LoadTestReport.objects.filter(pk__in=[r.pk for r in world.reports.values()]).update(**columns)


def test_a_throughput_below_the_minimum_fails_saying_it_is_below(world, release):
    ledger_services.update_service(world.service, actor=None, slo_min_output_tokens_per_s=1000)
    measured(world, output_tokens_per_s=1200.0)
    high = world.reports["high_concurrency"]
    LoadTestReport.objects.filter(pk=high.pk).update(output_tokens_per_s=850.0)

    status, reason = gate(release)

    assert status == "fail"
    assert reason == (
        "output throughput 850 tokens/s under high_concurrency is below the service SLO of "
        f"1000 tokens/s — report #{high.pk}."
    )


def test_a_concurrency_below_the_minimum_fails_saying_it_is_below(world, release):
    ledger_services.update_service(world.service, actor=None, slo_min_concurrency=16)
    measured(world, concurrency=32.0)
    high = world.reports["high_concurrency"]
    LoadTestReport.objects.filter(pk=high.pk).update(concurrency=8.0)

    status, reason = gate(release)

    assert status == "fail"
    assert reason == (
        "concurrency 8 requests under high_concurrency is below the service SLO of "
        f"16 requests — report #{high.pk}."
    )
    assert "exceeds" not in reason


def test_minimums_met_exactly_pass(world, release):
    ledger_services.update_service(
        world.service, actor=None, slo_min_output_tokens_per_s=1000, slo_min_concurrency=16
    )
    measured(world, output_tokens_per_s=1000.0, concurrency=16.0)

    status, reason = gate(release)

    assert status == "pass", reason
    assert reason == (
        "current reports for short, high_concurrency, long_context, streaming are within "
        "the service SLOs."
    )


def test_a_report_without_a_concurrency_does_not_attain_the_minimum(world, release):
    ledger_services.update_service(world.service, actor=None, slo_min_concurrency=16)
    measured(world, concurrency=16.0)
    short = world.reports["short"]
    # A rate-driven run: the tool records a request rate, no concurrency.
    LoadTestReport.objects.filter(pk=short.pk).update(concurrency=None)

    status, reason = gate(release)

    assert status == "fail"
    assert reason == f"concurrency under short not measured — report #{short.pk}."


def test_a_timeout_slo_is_named_as_not_judged_without_failing_the_gate(world, release):
    ledger_services.update_service(world.service, actor=None, slo_timeout_rate_pct=Decimal("0.50"))

    status, reason = gate(release)

    assert status == "pass"
    assert reason.endswith(
        "are within the service SLOs. The timeout rate SLO is not judged: load-test reports "
        "do not record timeouts; the periodic review judges it on the gateway's days."
    )
    assert "timeout rate under" not in reason


def test_a_failing_gate_still_says_the_timeout_slo_is_not_judged(world, release):
    ledger_services.update_service(
        world.service,
        actor=None,
        slo_timeout_rate_pct=Decimal("0.50"),
        slo_min_output_tokens_per_s=1000,
    )
    measured(world, output_tokens_per_s=1200.0)
    short = world.reports["short"]
    LoadTestReport.objects.filter(pk=short.pk).update(output_tokens_per_s=999.0)

    status, reason = gate(release)

    assert status == "fail"
    assert reason == (
        "output throughput 999 tokens/s under short is below the service SLO of 1000 tokens/s "
        f"— report #{short.pk}. The timeout rate SLO is not judged: load-test reports do not "
        "record timeouts; the periodic review judges it on the gateway's days."
    )


def test_the_gate_and_the_matrix_agree_on_the_minimums(world, release):
    ledger_services.update_service(
        world.service, actor=None, slo_min_output_tokens_per_s=1000, slo_min_concurrency=16
    )
    measured(world, output_tokens_per_s=1200.0, concurrency=16.0)
    short = world.reports["short"]
    LoadTestReport.objects.filter(pk=short.pk).update(output_tokens_per_s=900.0, concurrency=None)

    _, reason = gate(release)
    matrix = ledger_queries.slo_matrix(type(world.service).objects.get(pk=world.service.pk))

    (candidate,) = [b for b in matrix["revisions"] if b["revision"] == world.candidate]
    rows = {r["workload"]: {c["metric"]: c["word"] for c in r["cells"]} for r in candidate["rows"]}
    assert rows["short"]["throughput"] == "breached"
    assert "output throughput 900 tokens/s under short is below" in reason
    assert rows["short"]["concurrency"] == "no evidence"
    assert "concurrency under short not measured" in reason
    for workload in ("high_concurrency", "long_context", "streaming"):
        assert rows[workload]["throughput"] == rows[workload]["concurrency"] == "met"
        assert f"under {workload}" not in reason
