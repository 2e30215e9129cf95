"""A revision rolled back off a service is never a default rollback target again until a
release puts it live: not the plan's, not the incident screen's or its API's, not the
rollback form's preselection, not readiness's. The pages say when and why it was rolled
back, and going back to it anyway takes an explicit confirmation with a reason, which
the rollback's Event records."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils import timezone

from ledger import services as ledger_services
from ledger.models import Event
from releases.governance import gates, services
from releases.governance.queries.plan import plan_readiness, rollback_plan
from releases.governance.queries.rolled_back import rolled_back_revisions
from releases.governance.services.readiness import refresh_readiness
from releases.models import ReadinessRecord, RollbackEvent
from tests.ledger.factories import RevisionFactory
from tests.releases.factories import file_release, roll_out
from tests.releases.test_rollbacks import release_fully

pytestmark = pytest.mark.django_db

REASON = "p95 TTFT doubled for tenant support"


@pytest.fixture
def earlier(world):
    """A revision that served before the live one."""
    revision = RevisionFactory(service=world.service, runtime=world.live.runtime)
    ledger_services.set_live_revision(world.service, revision, actor=None, reason="what ran")
    ledger_services.set_live_revision(world.service, world.live, actor=None, reason="back")
    world.service.refresh_from_db()
    return revision


def _release_and_roll_back(world, owner, signers, sre) -> RollbackEvent:
    release = file_release(world, owner, path="emergency", emergency_reason="a fix for INC-7")
    release_fully(roll_out(release, owner, signers), sre)
    rollback = services.record_rollback(world.service, actor=sre, reason=REASON)
    world.service.refresh_from_db()
    assert world.service.live_revision_id == world.live.pk
    return rollback


@pytest.fixture
def rolled_back(world, earlier, owner, signers, sre):
    return _release_and_roll_back(world, owner, signers, sre)


def test_the_revision_just_rolled_back_is_not_the_default_target(world, earlier, rolled_back):
    plan = rollback_plan(world.service)
    assert plan.release is None  # the release that made it live was rolled back
    assert plan.target == earlier  # not world.candidate, which served just before
    assert plan.passed_over is not None
    assert (plan.passed_over.revision_id, plan.passed_over.rollback_id) == (
        world.candidate.pk,
        rolled_back.pk,
    )
    assert plan.passed_over.reason == REASON
    readiness = plan_readiness(world.service, plan)
    assert readiness.target == earlier
    refresh_readiness(world.service.pk)
    assert ReadinessRecord.objects.get(service=world.service).target == earlier


def test_a_rollback_to_the_default_records_which_revision_it_passed_over(
    world, earlier, rolled_back, sre
):
    again = services.record_rollback(world.service, actor=sre, reason="still slow")
    assert again.to_revision == earlier
    recorded = Event.objects.filter(action="rollback.recorded").latest("sequence").payload_data
    assert recorded["passed_over"] == {"revision": world.candidate.pk, "rollback": rolled_back.pk}
    assert "target_rolled_back" not in recorded


def test_with_nothing_else_served_there_is_no_default_target_and_it_says_why(
    world, owner, signers, sre
):
    rollback = _release_and_roll_back(world, owner, signers, sre)
    plan = rollback_plan(world.service)
    assert plan.target is None
    readiness = plan_readiness(world.service, plan)
    assert readiness.verdict == "not ready"
    [reason] = readiness.reasons
    assert reason.text.startswith(
        f"there is no rollback target: {world.candidate.label} was rolled back off kb-assistant"
    )
    assert f"by rollback #{rollback.pk}: {REASON}" in reason.text
    with pytest.raises(ValidationError) as refused:
        services.record_rollback(world.service, actor=sre, reason="again")
    message = refused.value.message_dict["target_revision"][0]
    assert f"{world.candidate.label} was rolled back off kb-assistant" in message
    assert "Name the revision to go back to" in message


def test_the_incident_screen_and_its_api_name_the_next_target_and_say_why(
    client, world, earlier, rolled_back, sre
):
    client.force_login(sre)
    answer = client.get("/api/services/kb-assistant/incident/").json()["rollback"]
    assert answer["target"]["id"] == earlier.pk
    passed = answer["passed_over"]
    assert passed["revision"] == {"id": world.candidate.pk, "label": world.candidate.label}
    assert passed["rollback"] == rolled_back.pk
    assert passed["reason"] == REASON
    assert passed["rolled_back_at"] == rolled_back.started_at.isoformat().replace("+00:00", "Z")

    body = client.get(reverse("releases:incident", args=["kb-assistant"])).content.decode()
    rollback = body.split('id="rollback-heading"')[1].split("</section>")[0]
    assert f"<strong>{earlier.label}</strong>" in rollback
    notice = rollback.split('id="passed-over"')[1].split("</p>")[0]
    detail = reverse("releases:rollback_detail", args=["kb-assistant", rolled_back.pk])
    assert f'href="{detail}"' in notice
    assert f"{world.candidate.label} is not the target" in notice
    assert f'<time datetime="{timezone.localtime(rolled_back.started_at).isoformat()}' in notice
    assert REASON in notice


def test_the_rollback_form_preselects_the_next_target_and_marks_the_rolled_back_one(
    client, world, earlier, rolled_back, sre
):
    client.force_login(sre)
    page = client.get(reverse("releases:rollback_new", args=["kb-assistant"])).content.decode()
    select = page.split('name="target_revision"')[1].split("</select>")[0]
    assert f'<option value="{earlier.pk}" selected>' in select
    candidate = select.split(f'<option value="{world.candidate.pk}"')[1].split("</option>")[0]
    assert f"rolled back by rollback #{rolled_back.pk}" in candidate
    assert "selected" not in candidate
    assert 'id="passed-over"' in page
    assert REASON in page


def test_going_back_to_the_rolled_back_revision_needs_a_confirmation_and_a_reason(
    client, world, earlier, rolled_back, sre
):
    client.force_login(sre)
    url = reverse("releases:rollback_new", args=["kb-assistant"])
    # Compared first: the page says it was rolled back and asks for the confirmation.
    page = client.get(url, {"target": world.candidate.pk}).content.decode()
    assert 'id="chosen-rolled-back"' in page
    assert 'name="confirm_rolled_back"' in page and 'name="rolled_back_reason"' in page

    response = client.post(url, {"target_revision": world.candidate.pk, "reason": "the fix is out"})
    assert response.status_code == 400
    form = response.context["form"]
    assert "was rolled back off kb-assistant" in form.errors["confirm_rolled_back"][0]
    assert form.errors["rolled_back_reason"]
    assert RollbackEvent.objects.count() == 1

    response = client.post(
        url,
        {
            "target_revision": world.candidate.pk,
            "reason": "the fix is out",
            "confirm_rolled_back": "on",
            "rolled_back_reason": "the 429s came from the gateway, not from the candidate",
        },
    )
    again = RollbackEvent.objects.latest("pk")
    assert response.status_code == 302
    assert again.to_revision == world.candidate
    recorded = Event.objects.filter(action="rollback.recorded").latest("sequence").payload_data
    assert recorded["target_rolled_back"] == {
        "rollback": rolled_back.pk,
        "rolled_back_at": rolled_back.started_at.isoformat(),
        "confirmed_because": "the 429s came from the gateway, not from the candidate",
    }


def test_the_api_refuses_the_rolled_back_revision_without_the_confirmation(
    client, world, earlier, rolled_back, sre
):
    client.force_login(sre)
    url = "/api/services/kb-assistant/rollbacks/"
    response = client.post(
        url, {"reason": "again", "target_revision": world.candidate.pk}, "application/json"
    )
    assert response.status_code == 400
    assert "was rolled back off kb-assistant" in str(response.json()["confirm_rolled_back"])
    response = client.post(
        url,
        {
            "reason": "again",
            "target_revision": world.candidate.pk,
            "confirm_rolled_back": True,
            "rolled_back_reason": "the cause was elsewhere",
        },
        "application/json",
    )
    assert response.status_code == 201, response.json()
    recorded = Event.objects.filter(action="rollback.recorded").latest("sequence").payload_data
    assert recorded["target_rolled_back"]["confirmed_because"] == "the cause was elsewhere"


def test_a_release_putting_it_live_again_makes_it_a_target_again(
    world, earlier, rolled_back, owner, signers, sre
):
    assert set(rolled_back_revisions(world.service.pk)) == {world.candidate.pk}
    again = file_release(world, owner, path="emergency", emergency_reason="the fix for INC-7")
    release_fully(roll_out(again, owner, signers), sre)
    assert rolled_back_revisions(world.service.pk) == {}


def test_a_release_naming_a_rolled_back_revision_as_its_target_fails_the_rollback_plan_gate(
    world, earlier, rolled_back, owner
):
    other = RevisionFactory(service=world.service, runtime=world.live.runtime)
    release = services.create_release(
        actor=owner,
        service=world.service,
        to_revision=other,
        change_kind="model_upgrade",
        summary="another try",
        rollback_target=world.candidate,
    )
    gate = gates.assess(release).gate("rollback_plan")
    assert gate["status"] == "fail"
    assert (
        f"the rollback target {world.candidate.label} was rolled back off kb-assistant"
        in (gate["reason"])
    )
    assert f"rollback #{rolled_back.pk}" in gate["reason"]
