"""An errored verification of a rollback target is *unknown*, not failed, and someone can
clear it: **Verify now** (platform SREs and the service's model owners, on the incident
screen, the service page and the `rollback_plan` gate, and over the API) queues the
target's verification replay; a rollback whose verification could not reach its backend
awaits confirmation, with *Verify again* beside *Confirm*; readiness and the gate read an
unknown verification as not verified yet, and the sweep tries it again within the hour."""

from __future__ import annotations

import datetime as dt

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.urls import reverse
from django.utils import timezone

from ledger.models import Event
from releases import permissions
from releases.governance import gates, services
from releases.governance.queries.plan import plan_readiness, rollback_plan
from releases.governance.services import TransitionRefused, rollbacks
from releases.governance.services.readiness import reverify_due_target
from releases.models import RollbackEvent
from replay.models import Run
from tests.factories import UserFactory
from tests.ledger.factories import RevisionFactory
from tests.releases.factories import complete_form, replay_run, roll_out
from tests.releases.test_rollbacks import release_fully
from tests.replay.helpers import make_set, sample

pytestmark = pytest.mark.django_db


@pytest.fixture
def released(world, release, owner, signers, sre):
    """r2 released: the plan in force goes back to r1, verified an hour ago."""
    make_set(world.verification_set.name, [sample("v1", "fake: reply=ok")])
    return release_fully(roll_out(release, owner, signers), sre)


def _errored(world, *, ago: dt.timedelta = dt.timedelta(minutes=5)) -> Run:
    """r1's verification as the worker leaves it when no attempt reached the backend, after
    the one that passed a day ago."""
    Run.objects.filter(pk=world.verification.pk).update(
        finished_at=timezone.now() - dt.timedelta(days=1)
    )
    return replay_run(
        world.verification_set,
        world.live_backend,
        trigger=Run.Trigger.VERIFICATION,
        verdict=Run.Verdict.ERRORED,
        finished_at=timezone.now() - ago,
        reasons=["the backend could not be reached: 1 of 1 attempts ended in connect_error"],
    )


def _draft(world, owner, **fields):
    """A release of a new revision, filed now that r2 is live."""
    world.service.refresh_from_db()
    return services.create_release(
        actor=owner,
        service=world.service,
        to_revision=RevisionFactory(service=world.service, runtime=world.live.runtime),
        change_kind="model_upgrade",
        summary="the next fine-tune",
        **{**complete_form(world), **fields},
    )


def test_platform_and_the_services_model_owners_may_verify_now(
    world, sre, owner, auditor, outsider, security
):
    assert permissions.can_verify_rollback_target(sre, world.service)
    assert permissions.can_verify_rollback_target(owner, world.service)
    stranger = UserFactory(username="otto", roles=["model_owner"])  # of no team here
    for person in (auditor, outsider, security, stranger, None):
        assert not permissions.can_verify_rollback_target(person, world.service)


def test_verify_now_on_the_incident_screen_queues_the_targets_verification(
    client, world, released, sre
):
    client.force_login(sre)
    page = client.get(reverse("releases:incident", args=["kb-assistant"])).content.decode()
    url = reverse("releases:verify_target", args=["kb-assistant"])
    assert f'action="{url}"' in page

    response = client.post(url, {"back": "incident"})
    assert response.status_code == 302
    assert response["Location"] == reverse("releases:incident", args=["kb-assistant"])
    run = Run.objects.get(trigger="verification", state="queued")
    assert (run.revision, run.backend, run.requested_by) == (world.live, world.live_backend, sre)
    assert (run.sample_set.name, run.sample_set.version) == (world.verification_set.name, 2)
    event = Event.objects.get(action="rollback.verification_requested")
    assert event.actor == sre
    assert event.payload_data == {
        "target": world.live.pk,
        "run": run.pk,
        "backend": world.live_backend.name,
        "sample_set": str(run.sample_set),
        "release": released.pk,
    }
    page = client.get(reverse("releases:incident", args=["kb-assistant"])).content.decode()
    assert f"run #{run.pk}" in page.split('id="target-verification"')[1].split("</div>")[0]

    with pytest.raises(TransitionRefused, match=f"already queued: run #{run.pk}"):
        services.verify_rollback_target(world.service, actor=sre)
    assert Run.objects.filter(trigger="verification", state="queued").count() == 1


def test_the_service_page_offers_it_and_comes_back(client, world, released, owner):
    client.force_login(owner)
    page = client.get(reverse("releases:service_detail", args=["kb-assistant"])).content.decode()
    url = reverse("releases:verify_target", args=["kb-assistant"])
    assert f'action="{url}"' in page
    response = client.post(url, {"back": "service"})
    assert response["Location"] == reverse("releases:service_detail", args=["kb-assistant"]) + (
        "#rollback"
    )
    assert Run.objects.get(trigger="verification", state="queued").requested_by == owner


def test_verify_now_on_the_gate_verifies_the_releases_own_target(
    client, world, released, owner, sre
):
    draft = _draft(world, owner)
    # The draft goes back to what is live now (r2), never verified: its gate fails.
    assert gates.assess(draft).gate("rollback_plan")["status"] == "fail"
    client.force_login(sre)
    page = client.get(reverse("releases:release_detail", args=[draft.pk])).content.decode()
    url = reverse("releases:release_verify_target", args=[draft.pk])
    gate = page.split('id="gate-rollback_plan"')[1].split('<li class="gate ')[0]
    assert f'action="{url}"' in gate
    response = client.post(url)
    assert response["Location"] == (
        reverse("releases:release_detail", args=[draft.pk]) + "#gate-rollback_plan"
    )
    run = Run.objects.get(trigger="verification", state="queued")
    assert (run.revision, run.backend) == (world.candidate, world.candidate_backend)


def test_who_may_not_is_refused_on_the_page_and_the_api(client, world, released, auditor):
    client.force_login(auditor)
    page = client.get(reverse("releases:incident", args=["kb-assistant"])).content.decode()
    assert "Verify now" not in page
    response = client.post(reverse("releases:verify_target", args=["kb-assistant"]))
    assert response.status_code == 403
    response = client.post("/api/services/kb-assistant/verify-target/")
    assert response.status_code == 403
    assert "model owners of team" in response.json()["detail"]
    assert not Run.objects.filter(trigger="verification", state="queued").exists()


def test_the_api_verifies_now_and_names_the_run(client, world, released, owner):
    client.force_login(owner)
    response = client.post("/api/services/kb-assistant/verify-target/")
    assert response.status_code == 202, response.json()
    run = Run.objects.get(trigger="verification", state="queued")
    assert response.json() == {
        "run": run.pk,
        "target": {"id": world.live.pk, "label": world.live.label},
        "backend": world.live_backend.name,
        "sample_set": str(run.sample_set),
    }
    again = client.post("/api/services/kb-assistant/verify-target/")
    assert again.status_code == 409
    assert f"already queued: run #{run.pk}" in again.json()["detail"]


def test_with_nothing_to_replay_it_on_it_says_why_and_offers_no_button(
    client, world, released, sre
):
    world.live_backend.enabled = False
    world.live_backend.save(update_fields=["enabled"])
    with pytest.raises(ValidationError, match="no enabled backend serves r1"):
        services.verify_rollback_target(world.service, actor=sre)
    client.force_login(sre)
    page = client.get(reverse("releases:incident", args=["kb-assistant"])).content.decode()
    state = page.split('id="target-verification"')[1].split("</div>")[0]
    assert "Verify now" not in state
    assert "Nothing can verify r1 now: no enabled backend serves it." in state


def test_an_unreachable_verification_is_unknown_not_failed(client, world, released, owner, sre):
    run = _errored(world)
    readiness = plan_readiness(world.service, rollback_plan(world.service))
    [reason] = [r for r in readiness.reasons if "verification" in r.text]
    assert reason.verdict == "at risk"
    assert reason.text.startswith("r1 awaits confirmation: its last verification")
    assert f"run #{run.pk}" in reason.text
    assert "could not reach its backend, which says nothing about r1" in reason.text

    draft = _draft(world, owner, rollback_target=world.live)
    gate = gates.assess(draft).gate("rollback_plan")
    assert gate["status"] == "pending"
    assert gate["reason"].startswith("r1 is not verified yet: it awaits confirmation")

    client.force_login(sre)
    page = client.get(reverse("releases:incident", args=["kb-assistant"])).content.decode()
    state = page.split('id="target-verification"')[1].split("</div>")[0]
    assert "awaits confirmation" in state and "Verify now" in state


def test_a_rollback_whose_verification_reached_no_backend_awaits_confirmation(
    client, world, released, sre
):
    rollback = services.record_rollback(world.service, actor=sre, reason="errors at 4 %")
    first = rollback.verification_run
    Run.objects.filter(pk=first.pk).update(
        state=Run.State.FINISHED, verdict=Run.Verdict.ERRORED, finished_at=timezone.now()
    )
    rollbacks.conclude_verification(rollback)
    rollback.refresh_from_db()
    assert (rollback.state, rollback.finished_at) == ("awaiting_confirmation", None)
    assert rollback.outcome_note.startswith(
        f"Verification run #{first.pk} could not reach its backend"
    )
    unknown = Event.objects.get(action="rollback.verification_unknown")
    assert unknown.payload_data["verification_run"] == first.pk

    client.force_login(sre)
    detail = reverse("releases:rollback_detail", args=["kb-assistant", rollback.pk])
    page = client.get(detail).content.decode()
    retry = reverse("releases:rollback_reverify", args=["kb-assistant", rollback.pk])
    assert f'action="{retry}"' in page and "Confirm" in page
    response = client.post(retry)
    assert response["Location"] == detail
    rollback.refresh_from_db()
    assert rollback.state == "verifying"
    assert rollback.verification_run != first
    assert rollback.verification_run.state == "queued"
    assert Event.objects.filter(action="rollback.verification_retried").count() == 1
    with pytest.raises(ValidationError, match="only one awaiting confirmation"):
        services.reverify_rollback(rollback, actor=sre)


def test_retrying_a_rollbacks_verification_needs_the_same_permission(world, released, sre, auditor):
    rollback = services.record_rollback(world.service, actor=sre, reason="errors at 4 %")
    RollbackEvent.objects.filter(pk=rollback.pk).update(state="awaiting_confirmation")
    with pytest.raises(PermissionDenied):
        services.reverify_rollback(rollback, actor=auditor)


def test_the_sweep_tries_an_unknown_verification_again_within_the_hour(world, released):
    _errored(world, ago=dt.timedelta(minutes=20))
    assert reverify_due_target(world.service) is None  # just tried: not yet
    Run.objects.filter(verdict=Run.Verdict.ERRORED).update(
        finished_at=timezone.now() - dt.timedelta(minutes=61)
    )
    queued = reverify_due_target(world.service)
    assert queued is not None and queued.revision == world.live
