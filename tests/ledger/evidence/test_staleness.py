"""Evidence expires: by age (per tier), when the revision's fingerprint moves, when the hardware changes."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.utils import timezone

from ledger import queries, services
from ledger.models import LoadTestReport
from tests.ledger.evidence.conftest import import_file

START = dt.datetime(2026, 1, 5, 9, 0, tzinfo=dt.UTC)


def _status(report: LoadTestReport) -> queries.EvidenceStatus:
    return queries.evidence_status(LoadTestReport.objects.with_context().get(pk=report.pk))


@pytest.fixture
def report(revision):
    with time_machine.travel(START, tick=False):
        made, _ = import_file(revision, "vllm", "vllm_c2_n20_detailed.json")
    return made


def test_fresh_evidence_is_current(report):
    with time_machine.travel(START + dt.timedelta(days=1), tick=False):
        assert _status(report)[:2] == ("current", "")


def test_production_evidence_goes_stale_after_90_days(report):
    with time_machine.travel(START + dt.timedelta(days=90), tick=False):
        assert _status(report).status == "current"
    with time_machine.travel(START + dt.timedelta(days=91), tick=False):
        status, reason = _status(report)[:2]
    assert status == "stale"
    assert reason == (
        "measured 2026-01-05, 91 days ago; production services accept evidence up to 90 days old"
    )


def test_the_age_limit_follows_the_tier_and_the_settings(report, service, settings):
    services.update_service(service, actor=None, tier="internal")
    with time_machine.travel(START + dt.timedelta(days=150), tick=False):
        assert _status(report).status == "current"

    settings.EVIDENCE_MAX_AGE_DAYS = {**settings.EVIDENCE_MAX_AGE_DAYS, "internal": 120}
    with time_machine.travel(START + dt.timedelta(days=150), tick=False):
        assert _status(report).status == "stale"


def test_evidence_of_another_fingerprint_is_stale(report, revision):
    with time_machine.travel(START + dt.timedelta(days=1), tick=False):
        services.update_revision(revision, actor=None, context_limit=65536)
        revision.refresh_from_db()
        status, reason = _status(report)[:2]

    assert report.fingerprint != revision.fingerprint
    assert status == "stale"
    assert report.fingerprint.removeprefix("sha256:")[:12] in reason
    assert revision.fingerprint.removeprefix("sha256:")[:12] in reason


def test_evidence_from_other_hardware_is_stale(report, runtime):
    with time_machine.travel(START + dt.timedelta(days=1), tick=False):
        services.update_runtime(runtime, actor=None, gpu_count=4)
        status, reason = _status(report)[:2]

    assert status == "stale"
    assert reason == "it ran on 2 x H100-80GB; r1 runs on 4 x H100-80GB"


def test_every_reason_is_given(report, revision, runtime):
    with time_machine.travel(START + dt.timedelta(days=200), tick=False):
        services.update_runtime(runtime, actor=None, gpu_model="L40S")
        services.update_revision(revision, actor=None, context_limit=40960)
        reason = _status(report).reason

    assert reason.count("; ") >= 3  # age (itself two clauses), fingerprint, hardware
    assert "200 days ago" in reason
    assert "fingerprint" in reason
    assert "L40S" in reason


def test_current_reports_leave_stale_evidence_out(revision):
    with time_machine.travel(START, tick=False):
        old, _ = import_file(revision, "vllm", "vllm_c2_n20_detailed.json", workload="short")
    with time_machine.travel(START + dt.timedelta(days=60), tick=False):
        recent, _ = import_file(
            revision, "guidellm", "rate-sweep", "benchmarks.json", workload="batch"
        )
        # A per-request file whose request bodies name the model (AIPerf's records do not).
        newer_short, _ = import_file(
            revision, "genai_perf", "profile_export.json", workload="short"
        )

    with time_machine.travel(START + dt.timedelta(days=100), tick=False):
        assert [r.pk for r in queries.current_reports(revision)] == sorted(
            [recent.pk, newer_short.pk], reverse=True
        )
        assert [r.pk for r in queries.current_reports(revision, workload="short")] == [
            newer_short.pk
        ]
        assert old.pk not in {r.pk for r in queries.current_reports(revision)}
    with time_machine.travel(START + dt.timedelta(days=20), tick=False):
        assert {r.pk for r in queries.current_reports(revision)} == {
            old.pk,
            recent.pk,
            newer_short.pk,
        }


def test_has_current_report_says_whether_current_reports_holds_any(
    revision, django_assert_num_queries
):
    assert not queries.has_current_report(revision)
    with time_machine.travel(START, tick=False):
        import_file(revision, "vllm", "vllm_c2_n20_detailed.json", workload="short")
    for days, current in ((20, True), (100, False)):
        with time_machine.travel(START + dt.timedelta(days=days), tick=False):
            assert bool(queries.current_reports(revision)) is current
            # The revision as pages read it, with its parts: its reports take it
            # rather than joining it again.
            read = type(revision).objects.with_parts().get(pk=revision.pk)
            with django_assert_num_queries(1):
                assert queries.has_current_report(read) is current


def test_measured_at_can_be_given_but_not_in_the_future(revision):
    when = timezone.now() - dt.timedelta(days=100)

    report, _ = import_file(revision, "vllm", "vllm_c2_n20_detailed.json", measured_at=when)

    assert report.measured_at == when
    assert _status(report).status == "stale"
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError) as excinfo:
        import_file(
            revision,
            "aiperf",
            "profile_export.jsonl",
            measured_at=timezone.now() + dt.timedelta(days=1),
        )
    assert "measured_at" in excinfo.value.message_dict
