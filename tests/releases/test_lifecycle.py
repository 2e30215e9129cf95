"""The state machine: submit, sign, approve, reject, withdraw, reopen, roll out.

Each transition is one verb that refuses a state it does not apply to, naming
the current one, and appends no Event when it refuses.
"""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.core import mail
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone, translation

from ledger import locks
from ledger import services as ledger_services
from ledger.models import Event
from releases.governance import gates, services
from releases.governance.services import GatesNotPassed, TransitionRefused
from releases.models import Release, SignOff
from tests.releases.factories import build_world, file_release

pytestmark = pytest.mark.django_db

ROLES = ("model_team", "platform", "security_compliance", "business_owner")


def events_of(release: Release) -> list[str]:
    return list(
        Event.objects.for_subject("releases.release", release.pk)
        .order_by("sequence")
        .values_list("action", flat=True)
    )


def sign_all(release, signers, roles=ROLES):
    for role in roles:
        services.sign_off(release, actor=signers[role], role=role, decision="approve")
    release.refresh_from_db()
    return release


def test_a_draft_needs_only_service_revision_kind_and_summary(world, owner):
    release = services.create_release(
        actor=owner,
        service=world.service,
        to_revision=world.candidate,
        change_kind="engine_upgrade",
        summary="vLLM 0.6.3 to 0.7.0",
    )
    assert release.state == "draft"
    assert release.from_revision == world.live
    assert events_of(release) == ["release.filed"]


def test_bad_json_is_refused_naming_the_field_and_path(world, owner):
    with pytest.raises(ValidationError) as caught:
        services.create_release(
            actor=owner,
            service=world.service,
            to_revision=world.candidate,
            change_kind="model_upgrade",
            summary="x",
            gray_stages=[{"traffic_pct": 150, "observation_minutes": 10}],
            impact_downstream=["mainframe"],
        )
    errors = caught.value.message_dict
    assert errors["gray_stages"][0].startswith("gray_stages[0].traffic_pct: 150 is greater than")
    assert errors["impact_downstream"][0].startswith(
        "impact_downstream[0]: 'mainframe' is not one of"
    )
    assert not Release.objects.exists()


def test_only_model_owners_of_the_team_file_releases(world, sre):
    with pytest.raises(PermissionDenied, match="Only model owners of team 'kb-team'"):
        services.create_release(
            actor=sre,
            service=world.service,
            to_revision=world.candidate,
            change_kind="model_upgrade",
            summary="x",
        )


def test_submit_refuses_failing_gates_listing_them_and_writes_nothing(world, release, owner):
    world.reports["short"].delete()
    services.update_release(release, actor=owner, metrics_declared=["ttft"])
    before = Event.objects.count()
    with pytest.raises(GatesNotPassed) as caught:
        services.submit_release(release, actor=owner)
    assert [g["key"] for g in caught.value.gates] == ["load_evidence", "metrics_coverage"]
    assert "load_evidence, metrics_coverage" in caught.value.message
    release.refresh_from_db()
    assert release.state == "draft"
    assert Event.objects.count() == before


def test_submit_then_every_approval_moves_it_to_approved(release, owner, signers):
    services.submit_release(release, actor=owner)
    release.refresh_from_db()
    assert release.state == "submitted"
    for role in ROLES[:-1]:
        services.sign_off(release, actor=signers[role], role=role, decision="approve")
        release.refresh_from_db()
        assert release.state == "submitted"
    services.sign_off(
        release, actor=signers["business_owner"], role="business_owner", decision="approve"
    )
    release.refresh_from_db()
    assert release.state == "approved"
    assert events_of(release)[-2:] == ["release.signed_off", "release.approved"]


def test_one_rejection_rejects_and_reopening_makes_a_new_draft(release, owner, signers):
    services.submit_release(release, actor=owner)
    services.sign_off(
        release,
        actor=signers["security_compliance"],
        role="security_compliance",
        decision="reject",
        comment="retention of prompts is too long",
    )
    release.refresh_from_db()
    assert release.state == "rejected"
    result = gates.assess(release).gate("signoffs")
    assert result["status"] == "fail"
    assert result["reason"] == (
        "rejected by sofia for security & compliance: retention of prompts is too long."
    )
    copy = services.reopen_release(release, actor=owner)
    assert copy.state == "draft"
    assert copy.reopened_from == release
    assert copy.gray_stages == release.gray_stages
    assert events_of(copy) == ["release.reopened"]


def test_a_rejection_needs_a_comment(release, owner, signers):
    services.submit_release(release, actor=owner)
    with pytest.raises(ValidationError, match="A rejection needs a comment"):
        services.sign_off(release, actor=signers["platform"], role="platform", decision="reject")


def test_illegal_transitions_are_refused_naming_the_state_and_append_nothing(
    release, owner, signers
):
    before = Event.objects.count()
    with pytest.raises(TransitionRefused) as caught:
        services.sign_off(release, actor=signers["platform"], role="platform", decision="approve")
    assert str(caught.value) == (
        f"Release #{release.pk} is draft; only a submitted or approved or rolling out release "
        "can be signed off."
    )
    with pytest.raises(TransitionRefused, match=f"Release #{release.pk} is draft; only a approved"):
        services.start_rollout(release, actor=owner)
    services.submit_release(release, actor=owner)
    after_submit = Event.objects.count()
    assert after_submit == before + 1
    with pytest.raises(TransitionRefused) as caught:
        services.submit_release(release, actor=owner)
    assert caught.value.state == "submitted"
    assert str(caught.value) == (
        f"Release #{release.pk} is submitted; only a draft release can be submitted."
    )
    services.withdraw_release(release, actor=owner)
    with pytest.raises(TransitionRefused, match="is withdrawn; only a draft or submitted"):
        services.withdraw_release(release, actor=owner)
    assert Event.objects.count() == after_submit + 1


# ---------------------------------------------------------------- separation of duties


def test_the_filer_cannot_sign_their_own_release(release, owner, team):
    services.submit_release(release, actor=owner)
    with pytest.raises(PermissionDenied, match="the filer cannot sign it off"):
        services.sign_off(release, actor=owner, role="model_team", decision="approve")


def test_one_person_signs_one_role_only(release, owner, sre):
    sre.groups.add(*type(sre.groups.first()).objects.filter(name="security_compliance"))
    services.submit_release(release, actor=owner)
    services.sign_off(release, actor=sre, role="platform", decision="approve")
    with pytest.raises(PermissionDenied, match="one person signs one role only"):
        services.sign_off(release, actor=sre, role="security_compliance", decision="approve")


def test_a_role_is_signed_by_its_own_people(release, owner, business, outsider):
    services.submit_release(release, actor=owner)
    with pytest.raises(PermissionDenied, match="Only a platform sre can sign off for platform"):
        services.sign_off(release, actor=business, role="platform", decision="approve")
    with pytest.raises(PermissionDenied, match="of the service's team can sign off for model team"):
        services.sign_off(release, actor=outsider, role="model_team", decision="approve")


def test_a_superuser_outside_the_team_cannot_sign_for_the_model_team(release, owner, team):
    """Issue 26, 8a: the model team's sign-off says the service's team approves; an
    administrator who is not in it cannot say that for them."""
    from tests.factories import UserFactory

    root = UserFactory(username="root-user", is_superuser=True, is_staff=True)
    services.submit_release(release, actor=owner)
    events = Event.objects.count()
    with pytest.raises(PermissionDenied) as caught:
        services.sign_off(release, actor=root, role="model_team", decision="approve")
    assert str(caught.value) == (
        "You are not in team 'kb-team': only a member of the service's team signs off for "
        "model team, administrators included."
    )
    assert not SignOff.objects.exists()
    assert Event.objects.count() == events
    # In the team, an administrator signs like any member.
    team.members.add(root)
    services.sign_off(release, actor=root, role="model_team", decision="approve")
    assert SignOff.objects.get().signer == root


def test_a_role_signed_once_is_not_signed_again(release, owner, sre):
    from tests.factories import UserFactory

    other = UserFactory(username="pat", roles=["platform_sre"])
    services.submit_release(release, actor=owner)
    services.sign_off(release, actor=sre, role="platform", decision="approve")
    with pytest.raises(TransitionRefused, match="sam already signed for platform"):
        services.sign_off(release, actor=other, role="platform", decision="approve")


# ---------------------------------------------------------------- approve what you saw


def _voided(release) -> list[SignOff]:
    return list(SignOff.objects.filter(release=release, voided_at__isnull=False))


def test_a_form_edit_after_approval_voids_the_signoffs_and_asks_again(release, owner, signers):
    services.submit_release(release, actor=owner)
    sign_all(release, signers)
    assert release.state == "approved"
    services.update_release(release, actor=owner, summary="a new summary")
    release.refresh_from_db()
    assert release.state == "submitted"
    voided = _voided(release)
    assert len(voided) == 4
    assert voided[0].void_reason == "voided: summary changed after you approved"
    assert events_of(release)[-1] == "release.approval_voided"


def test_a_replaced_report_voids_naming_the_report(world, release, owner, signers):
    from tests.releases.factories import report

    services.submit_release(release, actor=owner)
    services.sign_off(release, actor=signers["platform"], role="platform", decision="approve")
    old = world.reports["high_concurrency"]
    new = report(world.candidate, "high_concurrency")
    state = next(s for s in gates.assess(release).signoffs)
    assert not state.standing
    assert state.void_reason == (
        f"voided: load-test report #{old.pk} (high_concurrency) replaced by #{new.pk} "
        "after you approved"
    )
    services.revalidate_release(release)
    assert _voided(release)[0].void_reason == state.void_reason


def test_a_new_replay_run_voids_the_signoff(world, release, owner, signers):
    from tests.releases.factories import replay_run

    services.submit_release(release, actor=owner)
    services.sign_off(release, actor=signers["platform"], role="platform", decision="approve")
    run = replay_run(world.sample_set, world.candidate_backend, baseline=world.live_run)
    state = gates.assess(release).signoffs[0]
    assert state.void_reason == (
        f"voided: replay of kb-assistant-golden is now run #{run.pk} (passed), was run "
        f"#{world.candidate_run.pk} (passed) after you approved"
    )


def test_a_changed_gate_result_voids_the_signoff(world, release, owner, signers):
    services.submit_release(release, actor=owner)
    services.sign_off(release, actor=signers["platform"], role="platform", decision="approve")
    ledger_services.update_service(world.service, actor=None, slo_ttft_p95_ms=400)
    state = gates.assess(release).signoffs[0]
    assert (
        state.void_reason == "voided: gate load_evidence went from pass to fail after you approved"
    )


def test_a_changed_fingerprint_voids_the_signoff(world, release, owner, signers):
    services.submit_release(release, actor=owner)
    services.sign_off(release, actor=signers["platform"], role="platform", decision="approve")
    # The candidate is locked by the release; a row written around the verbs can still
    # move. The void must say so.
    type(world.live).objects.filter(pk=world.candidate.pk).update(fingerprint="sha256:" + "0" * 64)
    state = gates.assess(release).signoffs[0]
    assert "the to-revision's fingerprint changed" in state.void_reason


def test_a_signoff_keeps_the_hash_of_the_snapshot_it_approved(release, owner, signers):
    services.submit_release(release, actor=owner)
    assessment = gates.assess(release)
    signoff = services.sign_off(
        release, actor=signers["platform"], role="platform", decision="approve"
    )
    assert signoff.snapshot_hash == assessment.snapshot_hash
    assert len(signoff.snapshot_hash) == 64
    assert set(signoff.snapshot) == {
        "form",
        "gates",
        "evidence",
        "sample_sets",
        "revisions",
        "gateway_policy",
    }
    assert signoff.snapshot["gateway_policy"] == {
        "version": "v1",
        "sha256": release.to_revision.gateway_policy.sha256,
    }


# ---------------------------------------------------------------- waivers


def test_waivers_need_the_waiver_permission_a_reason_and_an_expiry(
    world, release, owner, business, sre
):
    world.reports["short"].delete()
    soon = timezone.now() + dt.timedelta(days=3)
    with pytest.raises(PermissionDenied, match="Only platform may waive the load_evidence"):
        services.grant_waiver(
            release, actor=business, gate="load_evidence", reason="x", expires_at=soon
        )
    with pytest.raises(PermissionDenied, match="Only security & compliance, platform and"):
        services.grant_waiver(
            release, actor=owner, gate="load_evidence", reason="x", expires_at=soon
        )
    with pytest.raises(ValidationError) as caught:
        services.grant_waiver(release, actor=sre, gate="load_evidence", reason=" ", expires_at=None)
    assert caught.value.message_dict == {
        "reason": ["A waiver needs a reason."],
        "expires_at": ["A waiver needs an expiry (an ISO date and time)."],
    }
    with pytest.raises(ValidationError, match="cannot be waived"):
        services.grant_waiver(release, actor=sre, gate="signoffs", reason="x", expires_at=soon)
    with pytest.raises(ValidationError, match="has already passed"):
        services.grant_waiver(
            release,
            actor=sre,
            gate="load_evidence",
            reason="x",
            expires_at=timezone.now() - dt.timedelta(minutes=1),
        )
    services.grant_waiver(
        release,
        actor=sre,
        gate="load_evidence",
        reason="short prompts retested Monday",
        expires_at=soon,
    )
    services.submit_release(release, actor=owner)
    release.refresh_from_db()
    assert release.state == "submitted"


# ---------------------------------------------------------------- emergency and calendar


def test_an_emergency_release_rolls_out_before_signoffs_which_fall_overdue(
    release, owner, signers, settings
):
    settings.RELEASES_EMERGENCY_SIGNOFF_HOURS = 6
    services.update_release(
        release, actor=owner, path="emergency", emergency_reason="KV-cache OOM kills pods"
    )
    services.submit_release(release, actor=owner)
    start = timezone.now()
    with time_machine.travel(start, tick=False):
        services.start_rollout(release, actor=owner)
    release.refresh_from_db()
    assert release.state == "rolling_out"
    assert release.signoffs_due_at == start + dt.timedelta(hours=6)
    with time_machine.travel(start + dt.timedelta(hours=7)):
        assessment = gates.assess(release)
        assert assessment.overdue
        assert "overdue since" in assessment.gate("signoffs")["reason"]
        sign_all(release, signers)
        assert not gates.assess(release).overdue
    assert release.state == "rolling_out"
    assert release.approved_at is not None


def test_a_normal_rollout_cannot_start_inside_a_blackout_window(release, owner, signers, sre):
    services.submit_release(release, actor=owner)
    sign_all(release, signers)
    now = timezone.now()
    services.create_blackout_window(
        actor=sre,
        name="Promotion week",
        starts_at=now - dt.timedelta(hours=1),
        ends_at=now + dt.timedelta(days=2),
    )
    with pytest.raises(TransitionRefused, match="blackout window 'Promotion week' runs until"):
        services.start_rollout(release, actor=owner)
    release.refresh_from_db()
    assert release.state == "approved"


# ---------------------------------------------------------------- lock rule and email


def test_a_revision_referenced_by_a_release_past_draft_is_locked(world, release, owner):
    assert locks.reasons_for(world.candidate) == []
    services.submit_release(release, actor=owner)
    assert locks.reasons_for(world.candidate) == [
        f"release #{release.pk} (submitted) references it"
    ]
    assert locks.reasons_for(world.candidate.model_asset) == [
        f"release #{release.pk} (submitted) of r2 uses it"
    ]
    with pytest.raises(ValidationError):
        ledger_services.update_revision(world.candidate, actor=None, context_limit=8192)


def test_signers_are_emailed_when_a_release_waits_for_them(
    release, owner, signers, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        services.submit_release(release, actor=owner)
    recipients = sorted(m.to[0] for m in mail.outbox)
    assert recipients == sorted(f"{u.username}@example.com" for u in signers.values())
    assert "olivia@example.com" not in recipients
    subjects = {m.subject for m in mail.outbox}
    assert f"Release #{release.pk} of kb-assistant waits for your sign-off (platform)" in subjects


def test_each_signer_is_emailed_in_their_own_language(
    release, owner, signers, django_capture_on_commit_callbacks
):
    from ledger.models import UserPreference

    UserPreference.objects.create(user=signers["platform"], language="zh-hans")
    with translation.override("en"), django_capture_on_commit_callbacks(execute=True):
        services.submit_release(release, actor=owner)

    by_recipient = {m.to[0]: m for m in mail.outbox}
    chinese = by_recipient[f"{signers['platform'].username}@example.com"]
    english = by_recipient[f"{signers['business_owner'].username}@example.com"]
    assert chinese.subject == f"kb-assistant 的发布 #{release.pk} 等待你签核（平台）"
    assert "该发布已提交，等待你签核。" in chinese.body
    assert f"/releases/{release.pk}/" in chinese.body
    assert english.subject.startswith(f"Release #{release.pk} of kb-assistant waits")
    assert "It was submitted and awaits your sign-off." in english.body


def test_an_internal_release_needs_model_team_and_platform_only(
    team, owner, model_team_signer, sre
):
    world = build_world(team, tier="internal", slug="internal-svc")
    release = file_release(world, owner)
    services.submit_release(release, actor=owner)
    services.sign_off(release, actor=model_team_signer, role="model_team", decision="approve")
    services.sign_off(release, actor=sre, role="platform", decision="approve")
    release.refresh_from_db()
    assert release.state == "approved"


def test_the_candidate_changes_only_while_a_draft(world, release, owner):
    from tests.ledger.factories import RevisionFactory

    other = RevisionFactory(service=world.service, runtime=world.candidate.runtime)
    services.update_release(release, actor=owner, to_revision=other.pk)
    release.refresh_from_db()
    assert release.to_revision == other
    services.update_release(release, actor=owner, to_revision=world.candidate)
    services.submit_release(release, actor=owner)
    with pytest.raises(ValidationError, match="changes only while a draft"):
        services.update_release(release, actor=owner, to_revision=other)


def test_a_foreign_key_may_be_given_by_id(world, owner):
    release = services.create_release(
        actor=owner,
        service=world.service,
        to_revision=world.candidate,
        change_kind="model_upgrade",
        summary="x",
        rollback_target=world.live.pk,
    )
    assert release.rollback_target == world.live
