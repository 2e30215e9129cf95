"""The daily sweep raises a review for each trigger, with its numbers, once; and nothing
below each threshold. Every setup goes through the verbs (run evidence pushed as the
gateway pushes it, licenses reviewed, assets deprecated), or rows as the replay worker
and the load-test importer leave them."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.db.models import F
from django.utils import timezone

from ledger import services as ledger_services
from ledger.models import Event, Service
from releases.models import Review, ReviewTrigger
from replay.models import Run
from tests.factories import UserFactory
from tests.ledger.factories import RuntimeFactory
from tests.releases.factories import replay_run, report
from tests.releases.review_helpers import push_days, sweep, with_previous_live
from tests.replay.factories import BackendFactory

pytestmark = pytest.mark.django_db


def only_trigger(service: Service) -> ReviewTrigger:
    review = Review.objects.get(service=service)
    triggers = list(review.triggers.all())
    assert len(triggers) == 1, [t.summary for t in triggers]
    return triggers[0]


def no_review(service: Service) -> None:
    assert not Review.objects.filter(service=service).exists(), [
        t.summary for t in ReviewTrigger.objects.filter(review__service=service)
    ]


# ---------------------------------------------------------------- cadence


def test_cadence_due_since_the_service_was_created(world):
    created = timezone.now() - dt.timedelta(days=91)
    Service.objects.filter(pk=world.service.pk).update(created_at=created)

    sweep()

    trigger = only_trigger(world.service)
    assert trigger.kind == "cadence"
    assert trigger.numbers["cadence_days"] == 90
    assert trigger.numbers["since_what"] == "service created"
    assert trigger.numbers["days_past_due"] == 1
    assert "A review every 90 days was due on" in trigger.summary


def test_cadence_not_due_a_day_before(world):
    created = timezone.now() - dt.timedelta(days=89)
    Service.objects.filter(pk=world.service.pk).update(created_at=created)

    sweep()

    no_review(world.service)


# ---------------------------------------------------------------- latency


def test_latency_above_the_slo_raises_one_review_with_the_7_day_p95(world):
    # Weighted by requests: (900*10000*6 + 1200*20000) / 80000 = 975 ms, above 800.
    push_days(world.service, [900] * 6 + [1200], requests=[10_000] * 6 + [20_000])

    sweep()

    trigger = only_trigger(world.service)
    assert trigger.kind == "latency_drift"
    assert trigger.numbers["ttft_p95_7d_ms"] == 975.0
    assert trigger.numbers["slo_ttft_p95_ms"] == 800
    assert trigger.numbers["above_slo"] is True
    assert trigger.numbers["days"] == 7
    assert "7-day p95 TTFT 975 ms" in trigger.summary
    assert "above the 800 ms SLO" in trigger.summary


def test_latency_below_the_slo_and_without_baseline_raises_nothing(world):
    push_days(world.service, [790] * 7)

    sweep()

    no_review(world.service)


def test_latency_more_than_the_limit_above_the_baseline_at_release(world, settings):
    settings.REVIEW_LATENCY_DRIFT_PCT = 20
    served = world.live.served_at
    baseline = report(world.live, "short", ttft_p95_ms=500.0, measured_at=served)
    push_days(world.service, [650] * 7)  # below the 800 ms SLO, 30 % above 500 ms

    sweep()

    trigger = only_trigger(world.service)
    assert trigger.kind == "latency_drift"
    assert trigger.numbers["above_slo"] is False
    assert trigger.numbers["above_baseline"] is True
    assert trigger.numbers["baseline_report"] == baseline.pk
    assert trigger.numbers["baseline_ttft_p95_ms"] == 500.0
    assert trigger.numbers["increase_pct"] == 30.0
    assert "30 % above the 500 ms its short load test measured at release" in trigger.summary


def test_latency_within_the_limit_above_the_baseline_raises_nothing(world, settings):
    settings.REVIEW_LATENCY_DRIFT_PCT = 20
    report(world.live, "short", ttft_p95_ms=500.0, measured_at=world.live.served_at)
    push_days(world.service, [590] * 7)  # 18 %

    sweep()

    no_review(world.service)


def test_too_few_days_of_evidence_judge_no_drift(world):
    push_days(world.service, [2000, 2000])  # far above the SLO, but two days only

    sweep()

    no_review(world.service)


# ---------------------------------------------------------------- error rate


def test_error_rate_above_the_slo(world):
    push_days(world.service, [500] * 7, error_rate=0.015)  # SLO 1.00 %

    sweep()

    trigger = only_trigger(world.service)
    assert trigger.kind == "error_rate_drift"
    assert trigger.numbers["error_rate_7d_pct"] == 1.5
    assert trigger.numbers["slo_error_rate_pct"] == 1.0
    assert trigger.numbers["requests_7d"] == 70_000
    assert "7-day error rate 1.50 % (70,000 requests" in trigger.summary


def test_error_rate_above_the_first_week_of_the_live_revision(world, settings):
    settings.REVIEW_ERROR_RATE_DRIFT_PCT = 50
    end = push_end = timezone.now().date() - dt.timedelta(days=8)
    push_days(world.service, [500] * 7, error_rate=0.002, end=push_end)
    push_days(world.service, [500] * 7, error_rate=0.004)

    sweep()

    trigger = only_trigger(world.service)
    assert trigger.kind == "error_rate_drift"
    assert trigger.numbers["baseline_error_rate_pct"] == 0.2
    assert trigger.numbers["error_rate_7d_pct"] == 0.4
    assert trigger.numbers["increase_pct"] == 100.0
    assert trigger.numbers["baseline_last"] == end.isoformat()


def test_error_rate_a_little_above_the_first_week_raises_nothing(world, settings):
    settings.REVIEW_ERROR_RATE_DRIFT_PCT = 50
    push_days(
        world.service,
        [500] * 7,
        error_rate=0.002,
        end=timezone.now().date() - dt.timedelta(days=8),
    )
    push_days(world.service, [500] * 7, error_rate=0.0025)  # 25 %

    sweep()

    no_review(world.service)


# ---------------------------------------------------------------- license


def test_a_revoked_license_approval_on_the_live_asset(world, security):
    asset = world.live.model_asset
    ledger_services.set_license_approval(
        asset, actor=security, approval="rejected", comment="the vendor changed its terms"
    )
    event = Event.objects.filter(action="model_asset.license_reviewed").latest("sequence")

    sweep()

    trigger = only_trigger(world.service)
    assert trigger.kind == "license"
    assert trigger.key == f"event:{event.sequence}"
    assert trigger.numbers["approval"] == "rejected"
    assert trigger.numbers["changes"][0]["before"] == {"license_approval": "approved"}
    assert "its license approval was revoked (approved → rejected) by sofia" in trigger.summary


def test_an_approval_taken_back_to_pending_through_the_registry(world):
    # A served asset's license itself cannot change (a new revision would be needed);
    # its approval can, through the registry's edit as through a license review.
    ledger_services.update_asset(world.live.model_asset, actor=None, license_approval="pending")

    sweep()

    trigger = only_trigger(world.service)
    assert trigger.kind == "license"
    assert trigger.numbers["approval"] == "pending"
    assert trigger.numbers["changes"][0]["action"] == "model_asset.updated"
    assert "its license approval was revoked (approved → pending) by system" in trigger.summary


def test_a_license_approved_again_is_no_change(world, security):
    ledger_services.set_license_approval(
        world.live.model_asset, actor=security, approval="approved", comment="checked again"
    )

    sweep()

    no_review(world.service)


# ---------------------------------------------------------------- rollback target


def test_a_stale_verification_of_the_rollback_target(world):
    previous = with_previous_live(world.service, world.live)
    backend = BackendFactory(name="kb-previous", revision=previous)
    run = replay_run(
        world.verification_set,
        backend,
        trigger=Run.Trigger.VERIFICATION,
        finished_at=timezone.now() - dt.timedelta(days=8),
    )

    sweep()

    trigger = only_trigger(world.service)
    assert trigger.kind == "rollback_verification"
    assert trigger.numbers["run"] == run.pk
    assert trigger.numbers["age_days"] == 8
    assert trigger.numbers["limit_days"] == 7
    assert trigger.numbers["stale"] is True
    assert trigger.numbers["target"] == previous.label
    assert "its last verification passed 8 days ago" in trigger.summary


def test_a_failed_verification_of_the_rollback_target(world):
    previous = with_previous_live(world.service, world.live)
    backend = BackendFactory(name="kb-previous", revision=previous)
    replay_run(world.verification_set, backend, trigger=Run.Trigger.VERIFICATION, verdict="failed")

    sweep()

    trigger = only_trigger(world.service)
    assert trigger.numbers["verdict"] == "failed"
    assert trigger.numbers["stale"] is False
    assert trigger.key.endswith(":failed")


def test_a_verification_that_reached_no_backend_raises_nothing(world):
    """Unknown, not failed: like a target never verified, the checklist flags it."""
    previous = with_previous_live(world.service, world.live)
    backend = BackendFactory(name="kb-previous", revision=previous)
    replay_run(world.verification_set, backend, trigger=Run.Trigger.VERIFICATION, verdict="errored")

    sweep()

    no_review(world.service)


def test_a_recent_passing_verification_raises_nothing(world):
    previous = with_previous_live(world.service, world.live)
    backend = BackendFactory(name="kb-previous", revision=previous)
    replay_run(
        world.verification_set,
        backend,
        trigger=Run.Trigger.VERIFICATION,
        finished_at=timezone.now() - dt.timedelta(days=6),
    )

    sweep()

    no_review(world.service)


# ---------------------------------------------------------------- evidence, replay, lifecycle


def test_expired_live_evidence(world):
    old = report(world.live, "short", measured_at=timezone.now() - dt.timedelta(days=91))

    sweep()

    trigger = only_trigger(world.service)
    assert trigger.kind == "evidence_expired"
    assert trigger.numbers["reports"][0]["report"] == old.pk
    assert trigger.numbers["max_age_days"] == 90
    assert "91 days ago; production services accept evidence up to 90 days old" in (trigger.summary)


def test_evidence_within_its_age_raises_nothing(world):
    report(world.live, "short", measured_at=timezone.now() - dt.timedelta(days=89))

    sweep()

    no_review(world.service)


def test_a_replay_regression_on_the_live_revision(world):
    regressed = replay_run(
        world.sample_set,
        world.live_backend,
        verdict="regressed",
        baseline=world.live_run,
        reasons=["p95 TTFT rose 40 %"],
    )

    sweep()

    trigger = only_trigger(world.service)
    assert trigger.kind == "replay_regression"
    assert trigger.numbers["runs"][0]["run"] == regressed.pk
    assert trigger.numbers["runs"][0]["reasons"] == ["p95 TTFT rose 40 %"]


def test_a_regression_passed_again_since_raises_nothing(world):
    replay_run(world.sample_set, world.live_backend, verdict="regressed")
    replay_run(world.sample_set, world.live_backend, verdict="passed")

    sweep()

    no_review(world.service)


def test_the_live_asset_deprecated(world):
    ledger_services.deprecate_asset(world.live.model_asset, actor=None)

    sweep()

    trigger = only_trigger(world.service)
    assert trigger.kind == "asset_deprecated"
    assert trigger.numbers["lifecycle"] == "deprecated"
    assert trigger.numbers["since"] == timezone.localdate().isoformat()


@pytest.mark.parametrize(
    ("newer", "raised"), [(["0.7.0", "0.8.1"], False), (["0.7.0", "0.8.1", "0.10.0"], True)]
)
def test_an_engine_more_than_n_releases_behind(world, team, settings, newer, raised):
    settings.REVIEW_ENGINE_RELEASES_BEHIND = 2
    RuntimeFactory(team=team, engine="vllm", engine_version="0.5.4")  # older: not counted
    for version in newer:
        RuntimeFactory(team=team, engine="vllm", engine_version=version)
    RuntimeFactory(team=team, engine="sglang", engine_version="0.9.9")  # another engine

    sweep()

    if not raised:
        no_review(world.service)
        return
    trigger = only_trigger(world.service)
    assert trigger.kind == "engine_outdated"
    assert trigger.numbers["version"] == "0.6.3"
    assert trigger.numbers["newer"] == ["0.7.0", "0.8.1", "0.10.0"]
    assert trigger.numbers["behind"] == 3
    assert trigger.key == "engine:vllm:0.6.3:0.10.0"


# ---------------------------------------------------------------- once, and who


def test_a_review_is_raised_once_and_new_triggers_join_it(world):
    push_days(world.service, [950] * 7)
    sweep()
    review = Review.objects.get(service=world.service)
    raised = Event.objects.filter(action="review.raised").count()

    report_again = sweep()

    assert report_again.raised == []
    assert Review.objects.filter(service=world.service).count() == 1
    assert Event.objects.filter(action__startswith="review.").count() == raised == 1

    ledger_services.deprecate_asset(world.live.model_asset, actor=None)
    sweep()

    assert Review.objects.filter(service=world.service).count() == 1
    assert sorted(review.triggers.values_list("kind", flat=True)) == [
        "asset_deprecated",
        "latency_drift",
    ]
    added = Event.objects.get(action="review.trigger_added")
    assert added.payload_data["triggers"][0]["kind"] == "asset_deprecated"
    assert added.subject_id == str(review.pk)


def test_the_platform_owner_of_the_team_is_the_assignee(world, team, sre):
    teammate = UserFactory(username="pat", roles=["platform_sre"])
    team.members.add(teammate)
    push_days(world.service, [950] * 7)

    sweep()

    review = Review.objects.get(service=world.service)
    assert review.assignee == teammate  # sam is platform too, but not of the team
    assert review.due_on == timezone.now().date() + dt.timedelta(days=14)  # production
    raised = Event.objects.get(action="review.raised")
    assert raised.payload_data["assignee"] == "pat"
    assert raised.payload_data["triggers"][0]["numbers"]["ttft_p95_7d_ms"] == 950.0


def test_without_a_platform_member_any_platform_sre_is_assigned(world, sre):
    push_days(world.service, [950] * 7)

    sweep()

    assert Review.objects.get(service=world.service).assignee == sre


def test_a_dry_run_says_what_it_would_raise_and_writes_nothing(world):
    push_days(world.service, [950] * 7)
    events = Event.objects.count()

    report_ = sweep(dry_run=True)

    assert [(r.service, r.new, [f.kind for f in r.findings]) for r in report_.raised] == [
        ("kb-assistant", True, ["latency_drift"])
    ]
    assert not Review.objects.exists()
    assert Event.objects.count() == events


def test_a_service_with_nothing_live_is_not_reviewed(team):
    from tests.ledger.factories import ServiceFactory

    service = ServiceFactory(slug="idle", team=team)
    Service.objects.filter(pk=service.pk).update(
        created_at=F("created_at") - dt.timedelta(days=400)
    )

    report_ = sweep()

    assert report_.scanned == 0
    no_review(service)


def test_overdue_is_marked_by_the_sweep_once(world, sre):
    push_days(world.service, [950] * 7)
    sweep()
    review = Review.objects.get(service=world.service)

    with time_machine.travel(timezone.now() + dt.timedelta(days=14), tick=False):
        sweep()
        review.refresh_from_db()
        assert review.state == "open"  # due today: not late yet

    later = timezone.now() + dt.timedelta(days=15)
    with time_machine.travel(later, tick=False):
        first = sweep()
        second = sweep()

    review.refresh_from_db()
    assert review.state == "overdue"
    assert review.overdue_since == later
    assert [pk for pk, _, _ in first.overdue] == [review.pk]
    assert second.overdue == []
    event = Event.objects.get(action="review.overdue")
    assert event.payload_data["days_late"] == 1
    assert event.payload_data["before"] == {"state": "open"}
