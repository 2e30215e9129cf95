"""Recording a rollback: the target restored as the live revision, the release it
undoes closed, its verification queued, and "what was live at T" answered from the
ledger across releases, rollbacks and a rollback of a rollback."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone

from ledger import queries as ledger_queries
from ledger import services as ledger_services
from ledger.chain import verify_chain
from ledger.models import Event
from releases.governance import services
from releases.governance.queries.plan import plan_readiness, rollback_plan
from releases.governance.services import TransitionRefused
from releases.models import RollbackEvent, UnauthorizedChange
from replay.models import Run
from tests.releases.factories import observe, roll_out
from tests.replay.factories import ProbeFactory
from tests.replay.helpers import make_set, sample

pytestmark = pytest.mark.django_db

GOOD = {"requests": 1200, "ttft_p95_ms": 640, "error_rate_pct": 0.2, "json_valid_pct": 99.5}


def release_fully(release, sre):
    """Promote every stage (the emergency path skips the observation windows)."""
    type(release).objects.filter(pk=release.pk).update(path="emergency", emergency_reason="x")
    while True:
        release.refresh_from_db()
        if release.state != "rolling_out":
            return release
        observe(release, sre, GOOD)
        services.promote_release(release, actor=sre)


@pytest.fixture
def released(release, owner, signers, sre):
    return release_fully(roll_out(release, owner, signers), sre)


def test_rolling_back_a_released_release_restores_its_target(world, released, sre):
    assert world.service.__class__.objects.get(pk=world.service.pk).live_revision == world.candidate
    rollback = services.record_rollback(
        world.service,
        actor=sre,
        reason="p95 TTFT doubled for tenant support",
        symptom="slow_first_token",
    )
    world.service.refresh_from_db()
    released.refresh_from_db()
    assert world.service.live_revision_id == world.live.pk
    assert (released.state, released.close_code) == ("rolled_back", "rolled_back")
    assert (rollback.from_revision_id, rollback.to_revision_id) == (
        world.candidate.pk,
        world.live.pk,
    )
    assert rollback.release == released
    assert rollback.kind == "model"
    assert rollback.expected_minutes == 10
    assert rollback.symptom == "slow_first_token"
    serving = ledger_queries.serving_at(world.service, timezone.now())
    assert serving.revision_id == world.live.pk
    assert serving.cause == {"rollback": rollback.pk}
    event = Event.objects.get(action="rollback.recorded")
    assert event.payload_data["to_revision"] == world.live.pk
    assert event.service_id == world.service.pk


def test_the_verification_set_of_the_plan_is_queued_against_the_targets_backend(
    world, released, sre
):
    make_set(world.verification_set.name, [sample("v1", "fake: reply=ok")])
    rollback = services.record_rollback(world.service, actor=sre, reason="errors at 4 %")
    run = rollback.verification_run
    assert rollback.state == "verifying"
    assert (run.trigger, run.state, run.backend, run.revision) == (
        "verification",
        "queued",
        world.live_backend,
        world.live,
    )
    assert run.sample_set.name == world.verification_set.name
    assert run.sample_set.version == 2  # the newest version of the set


def test_without_anything_to_verify_it_awaits_a_persons_confirmation(world, released, sre, owner):
    world.live_backend.enabled = False
    world.live_backend.save(update_fields=["enabled"])
    start = timezone.now()
    with time_machine.travel(start, tick=False):
        rollback = services.record_rollback(world.service, actor=sre, reason="errors at 4 %")
    assert rollback.state == "awaiting_confirmation"
    assert "no enabled backend serves" in rollback.outcome_note
    with pytest.raises(ValidationError, match="Say what you checked"):
        services.confirm_rollback(rollback, actor=sre, succeeded=True, note=" ")
    with pytest.raises(PermissionDenied, match="rollback permission"):
        services.confirm_rollback(rollback, actor=owner, succeeded=True, note="fine")
    with time_machine.travel(start + dt.timedelta(minutes=12), tick=False):
        services.confirm_rollback(rollback, actor=sre, succeeded=True, note="error rate 0.3 %")
    rollback.refresh_from_db()
    assert rollback.state == "succeeded"
    assert rollback.duration == dt.timedelta(minutes=12)
    finished = Event.objects.get(action="rollback.finished")
    assert finished.payload_data["duration_seconds"] == 720
    assert finished.payload_data["expected_minutes"] == 10
    with pytest.raises(ValidationError, match="only one awaiting confirmation"):
        services.confirm_rollback(rollback, actor=sre, succeeded=False, note="again")


def test_rolling_back_a_rollout_aborts_it_and_keeps_the_live_revision(
    world, release, owner, signers, sre
):
    rolling = roll_out(release, owner, signers)
    rollback = services.record_rollback(world.service, actor=sre, reason="canary errors at 9 %")
    rolling.refresh_from_db()
    world.service.refresh_from_db()
    assert (rolling.state, rolling.close_code) == ("aborted", "rolled_back")
    assert rolling.stages.get(number=1).state == "rolled_back"
    assert world.service.live_revision_id == world.live.pk
    assert rollback.to_revision_id == world.live.pk
    assert not Event.objects.filter(
        action="service.live_revision_changed", payload__contains="rollback"
    ).exists()


def test_what_was_live_at_t_across_a_release_a_rollback_and_a_rollback_of_it(
    world, release, owner, signers, sre
):
    t0 = timezone.now()
    with time_machine.travel(t0 + dt.timedelta(hours=1), tick=False):
        release_fully(roll_out(release, owner, signers), sre)
    with time_machine.travel(t0 + dt.timedelta(hours=2), tick=False):
        first = services.record_rollback(world.service, actor=sre, reason="slow")
    with time_machine.travel(t0 + dt.timedelta(hours=3), tick=False):
        # No release's plan is in force now, and what served before was rolled back: going
        # back to it is chosen, and confirmed with a reason.
        second = services.record_rollback(
            world.service,
            actor=sre,
            reason="the fix is out",
            target_revision=world.candidate,
            confirm_rolled_back=True,
            rolled_back_reason="the slowness came from the gateway",
        )
    expected = [
        (t0 + dt.timedelta(minutes=30), world.live.pk, {}),
        (t0 + dt.timedelta(minutes=90), world.candidate.pk, {"release": release.pk}),
        (t0 + dt.timedelta(minutes=150), world.live.pk, {"rollback": first.pk}),
        (t0 + dt.timedelta(minutes=210), world.candidate.pk, {"rollback": second.pk}),
    ]
    for at, revision_id, cause in expected:
        interval = ledger_queries.serving_at(world.service, at)
        assert (interval.revision_id, interval.cause) == (revision_id, cause), at
    # The answer agrees with the chain itself, which verifies.
    assert verify_chain().ok


def test_a_chosen_target_must_be_a_revision_of_the_service_and_not_live(world, released, sre):
    from tests.ledger.factories import RevisionFactory

    other = RevisionFactory()
    before = Event.objects.count()
    with pytest.raises(ValidationError, match="is not a revision of kb-assistant"):
        services.record_rollback(world.service, actor=sre, reason="x", target_revision=other)
    with pytest.raises(ValidationError, match="is already live on kb-assistant"):
        services.record_rollback(
            world.service, actor=sre, reason="x", target_revision=world.candidate
        )
    with pytest.raises(ValidationError, match="Say why you roll back"):
        services.record_rollback(world.service, actor=sre, reason="  ")
    with pytest.raises(ValidationError, match="'hiccup' is not a failure mode"):
        services.record_rollback(world.service, actor=sre, reason="x", symptom="hiccup")
    assert Event.objects.count() == before
    assert not RollbackEvent.objects.exists()


def test_nothing_to_roll_back_to_says_so(team, sre):
    from tests.ledger.factories import RevisionFactory, ServiceFactory

    service = ServiceFactory(team=team)
    only = RevisionFactory(service=service)
    ledger_services.set_live_revision(service, only, actor=None)
    with pytest.raises(ValidationError, match="There is nothing to roll back to"):
        services.record_rollback(service, actor=sre, reason="slow")


def test_recording_a_rollback_needs_the_rollback_permission(world, released, owner, auditor):
    for person in (owner, auditor):
        with pytest.raises(PermissionDenied, match="rollback permission"):
            services.record_rollback(world.service, actor=person, reason="slow")


def test_the_rollback_permission_can_be_granted_to_anyone(world, released, auditor):
    from django.contrib.auth.models import Permission

    auditor.user_permissions.add(Permission.objects.get(codename="record_rollback"))
    auditor = type(auditor).objects.get(pk=auditor.pk)  # a fresh permission cache
    rollback = services.record_rollback(world.service, actor=auditor, reason="on call tonight")
    assert rollback.recorded_by == auditor


def test_a_second_press_of_the_same_rollback_is_refused(world, released, sre):
    services.record_rollback(world.service, actor=sre, reason="slow")
    released.refresh_from_db()
    assert released.state == "rolled_back"
    # The same form submitted again: the release it meant is no longer in force, and
    # what is live now is where the first press went.
    with pytest.raises(ValidationError, match="already live"):
        services.record_rollback(
            world.service, actor=sre, reason="slow", target_revision=world.live
        )


def test_a_rollback_reconciles_the_services_open_unauthorized_changes(world, released, sre):
    world.candidate_backend.refresh_from_db()
    probe = ProbeFactory(
        backend=world.candidate_backend,
        reachable=True,
        drift=[{"what": "engine_version", "registered": "0.6.3", "reported": "0.7.1"}],
    )
    (change,) = services.record_unauthorized_changes()
    assert (change.probe, change.expected_revision) == (probe, world.candidate)
    assert services.record_unauthorized_changes() == []  # once
    rollback = services.record_rollback(world.service, actor=sre, reason="drifted engine")
    change.refresh_from_db()
    assert change.reconciled_at is not None
    assert change.reconciliation == f"rollback #{rollback.pk} set {world.live.label} live"
    assert UnauthorizedChange.objects.filter(reconciled_at__isnull=True).count() == 0


def test_a_person_reconciles_a_finding_saying_how(world, released, sre, owner):
    ProbeFactory(backend=world.candidate_backend, reachable=True, drift=[{"what": "model"}])
    (change,) = services.record_unauthorized_changes()
    with pytest.raises(PermissionDenied):
        services.reconcile_change(change, actor=owner, note="fixed")
    with pytest.raises(ValidationError, match="Say how it was reconciled"):
        services.reconcile_change(change, actor=sre, note="")
    services.reconcile_change(change, actor=sre, note="node 7 restarted with the registered image")
    change.refresh_from_db()
    assert change.reconciled_by == sre
    assert Event.objects.filter(action="service.unauthorized_change_reconciled").count() == 1


def test_drift_on_a_backend_of_a_revision_that_is_not_live_is_no_finding(world, released):
    ProbeFactory(backend=world.live_backend, reachable=True, drift=[{"what": "model"}])
    assert services.record_unauthorized_changes() == []


def test_a_promote_racing_a_rollback_is_refused_not_doubled(world, release, owner, signers, sre):
    rolling = roll_out(release, owner, signers)
    services.record_rollback(world.service, actor=sre, reason="errors")
    with pytest.raises(TransitionRefused, match="is aborted"):
        services.promote_release(rolling, actor=sre)
    assert Run.objects.filter(trigger="verification").count() <= 1


def test_the_sweep_queues_the_verification_of_a_target_that_is_due_once(world, released, sre):
    from releases.governance import tasks
    from releases.governance.services.readiness import reverify_due_target
    from releases.models import ReadinessRecord

    make_set(world.verification_set.name, [sample("v1", "fake: reply=ok")])
    # The plan's target (the live revision before the release) was verified 5 days ago:
    # past half of production's 7-day limit, so it is due.
    Run.objects.filter(pk=world.verification.pk).update(
        finished_at=timezone.now() - dt.timedelta(days=5)
    )
    result = tasks.sweep_rollback_readiness.apply().get()
    assert result["queued"] == 1
    queued = Run.objects.get(trigger="verification", state="queued")
    assert (queued.revision, queued.backend) == (world.live, world.live_backend)
    assert queued.sample_set.name == world.verification_set.name
    assert reverify_due_target(world.service) is None  # one is already queued
    record = ReadinessRecord.objects.get(service=world.service)
    world.service.refresh_from_db()
    judged = plan_readiness(world.service, rollback_plan(world.service))
    assert (record.target, record.verdict) == (world.live, judged.verdict)
    assert record.reasons == [{"verdict": r.verdict, "text": r.text} for r in judged.reasons]


def test_a_recently_verified_target_is_not_verified_again(world, released):
    from releases.governance.services.readiness import reverify_due_target

    assert reverify_due_target(world.service) is None
    assert not Run.objects.filter(trigger="verification", state="queued").exists()
