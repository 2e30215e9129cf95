"""Rollback readiness: a verdict for each reason, in plain words."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.utils import timezone

from ledger import services as ledger_services
from releases.governance.queries.readiness import VERIFICATION_MAX_AGE_DAYS, rollback_readiness
from replay.models import Run, SampleSet
from tests.ledger.evidence.conftest import import_file, sample_asset, sample_runtime
from tests.ledger.factories import RevisionFactory, RuntimeFactory, ServiceFactory
from tests.replay.factories import BackendFactory, SampleSetFactory

pytestmark = pytest.mark.django_db

NOW = timezone.now()


def _verified(revision, verdict=Run.Verdict.PASSED, *, ago=dt.timedelta(days=1)) -> Run:
    sample_set = SampleSet.objects.filter(name="kb-verify").first()
    return Run.objects.create(
        backend=BackendFactory(revision=revision),
        revision=revision,
        sample_set=sample_set or SampleSetFactory(name="kb-verify"),
        fingerprint=revision.fingerprint,
        state=Run.State.FINISHED,
        trigger=Run.Trigger.VERIFICATION,
        verdict=verdict,
        finished_at=NOW - ago,
    )


@pytest.fixture
def service(team):
    return ServiceFactory(slug="kb-assistant", team=team, tier="production")


@pytest.fixture
def target(service):
    """r1 served first, then r2 (same shape, so going back breaks nothing); r1 has
    current evidence and a fresh passed verification."""
    # The parts the sample load-test file measured, so its evidence is current.
    r1 = RevisionFactory(
        service=service,
        model_asset=sample_asset(service.team),
        runtime=sample_runtime(service.team),
    )
    r2 = RevisionFactory(
        service=service,
        model_asset=r1.model_asset,
        runtime=r1.runtime,
        gateway_policy_version="gw-2",
    )
    ledger_services.set_live_revision(service, r1, actor=None)
    ledger_services.set_live_revision(service, r2, actor=None)
    import_file(r1, "vllm", "vllm_c2_n20_detailed.json")
    _verified(r1)
    service.refresh_from_db()
    return r1


def _reasons(readiness):
    return [(r.verdict, r.text) for r in readiness.reasons]


def test_a_verified_pinned_current_target_with_expected_minutes_is_ready(service, target):
    readiness = rollback_readiness(service, expected_minutes=5, now=NOW)
    assert (readiness.verdict, readiness.target, readiness.reasons) == ("ready", target, [])
    assert readiness.last_verification is not None


def test_the_default_target_is_the_revision_that_served_before(service, target):
    assert rollback_readiness(service, expected_minutes=5, now=NOW).target == target


def test_no_target_is_not_ready(service):
    readiness = rollback_readiness(service, now=NOW)
    assert readiness.verdict == "not ready"
    assert readiness.reasons[0].text.startswith("there is no rollback target")


def test_the_live_revision_itself_is_no_target(service, target):
    readiness = rollback_readiness(service, service.live_revision, expected_minutes=5, now=NOW)
    assert ("not ready", "the target r2 is the live revision") in _reasons(readiness)


def test_expected_minutes_not_recorded_is_at_risk(service, target):
    readiness = rollback_readiness(service, now=NOW)
    assert _reasons(readiness) == [("at risk", "how long the rollback takes is not recorded")]
    assert readiness.verdict == "at risk"


def test_a_retired_asset_is_not_ready_and_a_deprecated_one_at_risk(service, target):
    ledger_services.deprecate_asset(target.model_asset, actor=None)
    readiness = rollback_readiness(service, target, expected_minutes=5, now=NOW)
    assert readiness.verdict == "at risk"
    assert f"its model asset {target.model_asset} is deprecated" in readiness.reasons[0].text

    ledger_services.retire_asset(target.model_asset, actor=None)
    readiness = rollback_readiness(service, target, expected_minutes=5, now=NOW)
    assert readiness.verdict == "not ready"
    assert readiness.reasons[0].text == f"its model asset {target.model_asset} is retired"


def test_an_unpinned_image_is_not_ready(team):
    """Production refuses unpinned images at registration; an internal service may hold one."""
    service = ServiceFactory(slug="kb-internal", team=team, tier="internal")
    unpinned = RuntimeFactory(team=team, image="registry.example.com/vllm-openai:v0.6.3")
    old = RevisionFactory(service=service, runtime=unpinned)
    ledger_services.set_live_revision(service, old, actor=None)
    ledger_services.set_live_revision(service, RevisionFactory(service=service), actor=None)
    service.refresh_from_db()
    readiness = rollback_readiness(service, expected_minutes=5, now=NOW)
    assert readiness.target == old
    assert readiness.verdict == "not ready"
    assert any("is not pinned by digest" in text for _, text in _reasons(readiness))


def test_lapsed_evidence_is_at_risk(service, target):
    days = 91
    with time_machine.travel(NOW + dt.timedelta(days=days), tick=False):
        readiness = rollback_readiness(service, target, expected_minutes=5)
    assert ("at risk", "r1 has no current load-test evidence") in _reasons(readiness)


def test_a_breaking_difference_from_live_is_named(service, target):
    short_runtime = RuntimeFactory(
        team=service.team, launch_parameters={"max_model_len": 8192, "tensor_parallel_size": 1}
    )
    smaller = RevisionFactory(
        service=service, model_asset=target.model_asset, runtime=short_runtime, context_limit=8192
    )
    _verified(smaller)
    readiness = rollback_readiness(service, smaller, expected_minutes=5, now=NOW)
    texts = [text for verdict, text in _reasons(readiness) if verdict == "at risk"]
    assert any(text.startswith("going back breaks callers: context_limit") for text in texts)


@pytest.mark.parametrize(
    ("verdict", "expected", "fragment"),
    [
        (Run.Verdict.FAILED, "not ready", "its last verification (kb-verify, "),
        (Run.Verdict.REGRESSED, "not ready", ") regressed"),
    ],
)
def test_a_failed_verification_is_not_ready(service, target, verdict, expected, fragment):
    _verified(target, verdict, ago=dt.timedelta(hours=1))
    readiness = rollback_readiness(service, target, expected_minutes=5, now=NOW)
    assert readiness.verdict == expected
    assert fragment in readiness.reasons[0].text


def test_a_verification_that_reached_no_backend_awaits_confirmation_at_risk(service, target):
    """Unknown, not failed: read as not verified yet (issue 27)."""
    run = _verified(target, Run.Verdict.ERRORED, ago=dt.timedelta(hours=1))
    readiness = rollback_readiness(service, target, expected_minutes=5, now=NOW)
    assert readiness.verdict == "at risk"
    assert readiness.reasons[0].text == (
        f"r1 awaits confirmation: its last verification ({run.finished_at:%Y-%m-%d %H:%M} "
        f"UTC, run #{run.pk}) could not reach its backend, which says nothing about r1; "
        "verify it again"
    )


def test_a_stale_verification_is_at_risk_by_the_tiers_limit(service, target):
    limit = VERIFICATION_MAX_AGE_DAYS["production"]
    _verified(target, ago=dt.timedelta(days=limit + 1, hours=1))
    Run.objects.filter(
        trigger=Run.Trigger.VERIFICATION, finished_at__gt=NOW - dt.timedelta(days=2)
    ).delete()
    readiness = rollback_readiness(service, target, expected_minutes=5, now=NOW)
    assert readiness.verdict == "at risk"
    assert readiness.reasons[0].text.startswith(
        f"its last verification passed {limit + 1} days ago"
    )
    assert readiness.reasons[0].text.endswith(f"production services re-verify within {limit} days")


def test_never_verified_is_at_risk(service, target):
    Run.objects.filter(trigger=Run.Trigger.VERIFICATION).delete()
    readiness = rollback_readiness(service, target, expected_minutes=5, now=NOW)
    assert _reasons(readiness) == [("at risk", "r1 has never been verified by a replay run")]


def test_the_verdict_is_the_worst_reason_and_they_come_worst_first(service, target):
    _verified(target, Run.Verdict.FAILED, ago=dt.timedelta(hours=1))
    readiness = rollback_readiness(service, target, now=NOW)
    assert readiness.verdict == "not ready"
    assert [r.verdict for r in readiness.reasons] == ["not ready", "at risk"]


def test_readiness_asks_a_constant_number_of_queries(
    service, target, django_assert_max_num_queries
):
    for _ in range(5):
        _verified(target)
    # Nine, and one for the gateway policies of live and target, which the diff reads.
    with django_assert_max_num_queries(10):
        rollback_readiness(service, expected_minutes=5, now=NOW)
