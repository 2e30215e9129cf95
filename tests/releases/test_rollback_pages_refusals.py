"""The rollback pages when something stands in the way: a target whose model is retired,
a target in the address that is not a revision, a rollback that is not there, a
confirmation of a rollback still verifying, a finding reconciled twice or without a
note; and the runbook pages: the playbooks and degradation policies, their editing, and
their refusals."""

from __future__ import annotations

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from ledger import services as ledger_services
from ledger.models import Event
from releases.governance import services
from releases.models import RollbackEvent, Runbook, UnauthorizedChange
from tests.replay.factories import ProbeFactory
from tests.replay.helpers import make_set, sample

pytestmark = pytest.mark.django_db


def _said(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


# ---------------------------------------------------------------- recording a rollback


def test_a_target_whose_model_is_retired_is_refused_beside_the_field(client, world, sre):
    ledger_services.retire_asset(world.candidate.model_asset, actor=None)
    client.force_login(sre)
    response = client.post(
        reverse("releases:rollback_new", args=[world.service.slug]),
        {"target_revision": str(world.candidate.pk), "reason": "errors at 4 % since 14:05"},
    )
    assert response.status_code == 400
    errors = response.context["form"].errors["target_revision"]
    assert errors == [
        f"{world.candidate.label}'s model asset {world.candidate.model_asset} is retired."
    ]
    assert "is retired." in response.content.decode()
    assert not RollbackEvent.objects.exists()
    assert not Event.objects.filter(action="rollback.recorded").exists()
    world.service.refresh_from_db()
    assert world.service.live_revision == world.live


def test_a_target_in_the_address_that_is_no_number_falls_back_to_the_plans(
    client, world, release, owner, signers, sre
):
    from tests.releases.factories import roll_out
    from tests.releases.test_rollbacks import release_fully

    release_fully(roll_out(release, owner, signers), sre)
    client.force_login(sre)
    response = client.get(
        reverse("releases:rollback_new", args=[world.service.slug]), {"target": "latest"}
    )
    assert response.status_code == 200
    assert response.context["target"] == world.live
    assert (
        f"What changes going back: {world.candidate.label} → {world.live.label}"
        in response.content.decode()
    )


def test_a_rollback_that_is_not_there_is_a_404(client, world, rolled_back, sre):
    client.force_login(sre)
    missing = client.get(reverse("releases:rollback_detail", args=[world.service.slug, 999999]))
    assert missing.status_code == 404
    # A rollback of one service is not found under another's address.
    elsewhere = client.get(
        reverse("releases:rollback_detail", args=["other-service", rolled_back.pk])
    )
    assert elsewhere.status_code == 404


@pytest.fixture
def rolled_back(world, release, owner, signers, sre):
    """A released candidate rolled back, its verification replay queued."""
    from tests.releases.factories import roll_out
    from tests.releases.test_rollbacks import release_fully

    release_fully(roll_out(release, owner, signers), sre)
    make_set(world.verification_set.name, [sample("v1", "fake: reply=ok")])
    return services.record_rollback(world.service, actor=sre, reason="errors at 4 %")


def test_a_rollback_still_verifying_is_not_confirmed_by_hand(client, world, rolled_back, sre):
    assert rolled_back.state == RollbackEvent.State.VERIFYING
    client.force_login(sre)
    response = client.post(
        reverse("releases:rollback_confirm", args=[world.service.slug, rolled_back.pk]),
        {"succeeded": "yes", "note": "errors back under 1 %"},
    )
    assert response.status_code == 400
    assert response.context["confirm_form"].errors["succeeded"] == [
        f"Rollback #{rolled_back.pk} is verifying: only one awaiting confirmation is "
        "confirmed by hand."
    ]
    rolled_back.refresh_from_db()
    assert rolled_back.state == RollbackEvent.State.VERIFYING
    assert not Event.objects.filter(action="rollback.confirmed").exists()


# ---------------------------------------------------------------- reconciling a finding


@pytest.fixture
def finding(world) -> UnauthorizedChange:
    ProbeFactory(
        backend=world.live_backend,
        drift=[{"what": "engine_version", "registered": "0.6.3", "reported": "0.7.1"}],
    )
    (change,) = services.record_unauthorized_changes()
    return change


def test_reconciling_without_a_note_says_the_note_is_needed(client, world, finding, sre):
    client.force_login(sre)
    url = reverse("releases:unauthorized_reconcile", args=[world.service.slug, finding.pk])
    response = client.post(url, {"note": ""})
    assert response.status_code == 302
    assert response["Location"] == (
        reverse("releases:service_detail", args=[world.service.slug]) + "#unauthorized"
    )
    assert _said(response) == ["Say how it was put back: the note is needed."]
    finding.refresh_from_db()
    assert finding.reconciled_at is None


def test_a_finding_reconciled_already_is_not_reconciled_again(client, world, finding, sre):
    client.force_login(sre)
    url = reverse("releases:unauthorized_reconcile", args=[world.service.slug, finding.pk])
    first = client.post(url, {"note": "node 7 restarted with the registered image"})
    assert _said(first) == ["Reconciled: the finding is closed, with your note."]
    finding.refresh_from_db()
    when = finding.reconciled_at
    second = client.post(url, {"note": "again"})
    assert second.status_code == 302
    assert _said(second)[-1].startswith("Already reconciled on ")
    finding.refresh_from_db()
    assert finding.reconciled_at == when
    assert finding.reconciled_by == sre


# ---------------------------------------------------------------- the runbook


def test_the_runbook_shows_the_tier_defaults_and_who_may_change_them(client, world, sre, auditor):
    url = reverse("releases:runbook", args=[world.service.slug])
    client.force_login(auditor)
    html = client.get(url).content.decode()
    assert "Playbooks of kb-assistant" in html
    assert "Defaults come from the production tier; platform and the service" in html
    assert reverse("releases:playbook_edit", args=[world.service.slug, "kv_cache_oom"]) not in html
    assert "kb-assistant declares no task types" in html
    client.force_login(sre)
    html = client.get(url).content.decode()
    assert "change any of them for kb-assistant: each change is recorded in the ledger" in html
    assert reverse("releases:playbook_edit", args=[world.service.slug, "kv_cache_oom"]) in html


def test_the_runbook_lists_each_task_type_and_marks_the_services_own(client, world, owner):
    ledger_services.update_service(world.service, actor=None, task_types=["chat", "sql"])
    services.set_degradation(
        world.service, actor=owner, task_type="chat", may_degrade=True, how="async queue"
    )
    services.set_playbook(
        world.service, actor=owner, mode="node_restart", diagnosis="Which node", recovery="Drain"
    )
    client.force_login(owner)
    response = client.get(reverse("releases:runbook", args=[world.service.slug]))
    assert response.status_code == 200
    rows = {task: policy for task, policy in response.context["degradation"]}
    assert rows["chat"].overridden and rows["chat"].how == "async queue"
    assert not rows["sql"].may_degrade and not rows["sql"].overridden
    html = response.content.decode()
    assert "never silently" in html
    assert "kb-assistant's own" in html  # the node_restart playbook's badge
    assert reverse("releases:degradation_edit", args=[world.service.slug, "sql"]) in html


def test_an_unknown_failure_mode_is_a_404(client, world, sre):
    client.force_login(sre)
    url = reverse("releases:playbook_edit", args=[world.service.slug, "hiccup"])
    assert client.get(url).status_code == 404


def test_a_playbook_of_too_many_steps_is_refused_beside_the_field(client, world, sre):
    client.force_login(sre)
    url = reverse("releases:playbook_edit", args=[world.service.slug, "node_restart"])
    too_many = "\n".join(f"step {n}" for n in range(21))
    response = client.post(url, {"diagnosis": "Which node", "recovery": too_many})
    assert response.status_code == 400
    assert response.context["form"].errors["recovery"] == ["At most 20 steps; got 21."]
    assert "At most 20 steps; got 21." in response.content.decode()
    assert not Runbook.objects.exists()


def test_a_task_type_the_service_does_not_serve_is_a_404(client, world, sre):
    ledger_services.update_service(world.service, actor=None, task_types=["chat"])
    client.force_login(sre)
    url = reverse("releases:degradation_edit", args=[world.service.slug, "sql"])
    assert client.get(url).status_code == 404
    assert client.post(url, {"may_degrade": "yes", "how": "replica"}).status_code == 404
    assert not Runbook.objects.exists()


def test_a_service_sets_how_a_task_type_degrades_and_goes_back_to_the_default(client, world, sre):
    ledger_services.update_service(world.service, actor=None, task_types=["sql"])
    client.force_login(sre)
    url = reverse("releases:degradation_edit", args=[world.service.slug, "sql"])
    form = client.get(url)
    assert form.status_code == 200
    assert "How sql degrades on kb-assistant" in form.content.decode()
    assert "This is the default policy; saving makes it kb-assistant" in form.content.decode()
    assert form.context["form"]["may_degrade"].value() == "no"

    saved = client.post(url, {"may_degrade": "yes", "how": "read-only replica answers"})
    assert saved.status_code == 302
    assert saved["Location"] == (
        reverse("releases:runbook", args=[world.service.slug]) + "#degradation"
    )
    assert _said(saved) == ["Saved how sql degrades on kb-assistant."]
    assert Runbook.objects.get(service=world.service).degradation == {
        "sql": {"may_degrade": True, "how": "read-only replica answers"}
    }
    again = client.get(url).content.decode()
    assert "kb-assistant has its own policy for sql." in again
    assert "Go back to the default" in again

    back = client.post(url, {"action": "default"})
    assert back.status_code == 302
    assert _said(back) == ["sql: back to the default policy."]
    assert Runbook.objects.get(service=world.service).degradation == {}
    changes = Event.objects.filter(action="service.degradation_changed").order_by("sequence")
    assert [e.payload_data["after"] for e in changes] == [
        {"may_degrade": True, "how": "read-only replica answers"},
        None,
    ]


def test_a_degradation_without_how_is_shown_again_naming_the_field(client, world, sre):
    ledger_services.update_service(world.service, actor=None, task_types=["sql"])
    client.force_login(sre)
    url = reverse("releases:degradation_edit", args=[world.service.slug, "sql"])
    response = client.post(url, {"may_degrade": "yes", "how": ""})
    assert response.status_code == 400
    assert "how" in response.context["form"].errors
    assert not Runbook.objects.exists()


def test_degradation_of_another_team_is_not_editable(client, world, outsider):
    ledger_services.update_service(world.service, actor=None, task_types=["sql"])
    client.force_login(outsider)
    url = reverse("releases:degradation_edit", args=[world.service.slug, "sql"])
    refused = client.get(url)
    assert refused.status_code == 403
    assert client.post(url, {"may_degrade": "yes", "how": "replica"}).status_code == 403
    assert not Runbook.objects.exists()
