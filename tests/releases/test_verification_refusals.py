"""Verify now, and verifying a rollback again, when it cannot be done: on the pages the
refusal is a message naming why and the reader goes back where they pressed; over the
API a missing release or rollback is a 404 naming it and a finished release a 409."""

from __future__ import annotations

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from ledger.models import Event
from releases.governance import services
from releases.models import RollbackEvent
from replay.models import Run
from tests.releases.factories import roll_out
from tests.releases.test_rollbacks import release_fully
from tests.replay.helpers import make_set, sample

pytestmark = pytest.mark.django_db


def _said(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


@pytest.fixture
def released(world, release, owner, signers, sre):
    """r2 released: the plan in force goes back to r1."""
    make_set(world.verification_set.name, [sample("v1", "fake: reply=ok")])
    return release_fully(roll_out(release, owner, signers), sre)


def _queued() -> list[Run]:
    return list(Run.objects.filter(trigger="verification", state="queued"))


def test_a_second_press_of_verify_now_says_one_is_queued_and_goes_back(
    client, world, released, sre
):
    client.force_login(sre)
    url = reverse("releases:verify_target", args=[world.service.slug])
    first = client.post(url, {"back": "service"})
    (run,) = _queued()
    assert first["Location"] == (
        reverse("releases:service_detail", args=[world.service.slug]) + "#rollback"
    )
    second = client.post(url, {"back": "somewhere-else"})
    # An unknown "back" goes to the incident screen, never to a free address.
    assert second["Location"] == reverse("releases:incident", args=[world.service.slug])
    assert _said(second)[-1] == f"A verification of r1 is already queued: run #{run.pk}."
    assert _queued() == [run]


def test_verify_now_on_a_finished_release_says_where_to_verify_instead(
    client, world, released, owner
):
    client.force_login(owner)
    response = client.post(reverse("releases:release_verify_target", args=[released.pk]))
    assert response["Location"] == (
        reverse("releases:release_detail", args=[released.pk]) + "#gate-rollback_plan"
    )
    assert _said(response) == [
        f"Release #{released.pk} is released: its rollback target is verified from the "
        "service's page now."
    ]
    assert _queued() == []


def test_verifying_again_a_rollback_that_is_verifying_is_refused_with_a_message(
    client, world, released, sre
):
    rollback = services.record_rollback(world.service, actor=sre, reason="errors at 4 %")
    assert rollback.state == RollbackEvent.State.VERIFYING
    client.force_login(sre)
    response = client.post(
        reverse("releases:rollback_reverify", args=[world.service.slug, rollback.pk])
    )
    assert response["Location"] == reverse(
        "releases:rollback_detail", args=[world.service.slug, rollback.pk]
    )
    assert _said(response) == [
        f"Rollback #{rollback.pk} is verifying: only one awaiting confirmation is verified again."
    ]
    assert not Event.objects.filter(action="rollback.verification_retried").exists()


# ---------------------------------------------------------------- the API


def test_the_api_names_a_release_or_rollback_that_is_not_there(client, sre):
    client.force_login(sre)
    release = client.post("/api/releases/999999/verify-target/")
    assert release.status_code == 404
    assert release.json()["detail"] == "There is no release #999999."
    rollback = client.post("/api/rollbacks/999999/reverify/")
    assert rollback.status_code == 404
    assert rollback.json()["detail"] == "There is no rollback #999999."


def test_the_api_refuses_verify_now_on_a_finished_release_with_its_state(client, released, owner):
    client.force_login(owner)
    response = client.post(f"/api/releases/{released.pk}/verify-target/")
    assert response.status_code == 409
    assert response.json() == {
        "detail": f"Release #{released.pk} is released: its rollback target is verified from "
        "the service's page now.",
        "state": "released",
    }
    assert _queued() == []


def test_the_api_verifies_again_a_rollback_awaiting_confirmation(client, world, released, sre):
    rollback = services.record_rollback(world.service, actor=sre, reason="errors at 4 %")
    first = rollback.verification_run
    Run.objects.filter(pk=first.pk).update(state="finished", verdict="errored")
    RollbackEvent.objects.filter(pk=rollback.pk).update(state="awaiting_confirmation")
    client.force_login(sre)
    response = client.post(f"/api/rollbacks/{rollback.pk}/reverify/")
    assert response.status_code == 200
    rollback.refresh_from_db()
    assert response.json()["state"] == "verifying" == rollback.state
    assert rollback.verification_run != first
    event = Event.objects.get(action="rollback.verification_retried")
    assert event.payload_data["previous_run"] == first.pk
