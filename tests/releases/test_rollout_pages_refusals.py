"""The rollout pages when something stands in the way: an action that does not exist,
a start whose gates no longer pass, ending a window that has ended, an observation the
verb refuses, and the page that corrects how a finished release ended."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.contrib.messages import get_messages
from django.urls import reverse
from django.utils import timezone

from ledger.models import Event
from releases.governance import services
from releases.models import Observation, Release, Stage
from tests.releases.factories import approve, observe, roll_out

pytestmark = pytest.mark.django_db

GOOD = {"requests": 1200, "ttft_p95_ms": 640, "error_rate_pct": 0.2, "json_valid_pct": 99.5}


def _said(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


@pytest.fixture
def rolling(release, owner, signers):
    return roll_out(release, owner, signers)


@pytest.fixture
def aborted(rolling, sre):
    services.abort_release(rolling, actor=sre, reason="not this quarter")
    rolling.refresh_from_db()
    return rolling


def test_an_action_that_does_not_exist_is_a_404_naming_the_actions(client, rolling, sre):
    client.force_login(sre)
    response = client.get(reverse("releases:rollout_action", args=[rolling.pk, "skip"]))
    assert response.status_code == 404
    assert (
        client.post(reverse("releases:rollout_action", args=[rolling.pk, "skip"])).status_code
        == 404
    )
    assert Stage.objects.get(release=rolling, number=1).state == "observing"


def test_a_start_whose_gates_fail_since_approval_is_refused_listing_them(
    client, world, release, owner, signers
):
    approve(release, owner, signers)
    assert release.state == Release.State.APPROVED
    world.reports["short"].delete()
    client.force_login(owner)
    response = client.post(reverse("releases:rollout_action", args=[release.pk, "start"]))
    assert response.status_code == 422
    html = response.content.decode()
    assert f"Release #{release.pk} cannot be rolled out: these gates neither pass nor are" in html
    # The evidence the signers approved changed too, so their sign-offs no longer count.
    assert [g["key"] for g in response.context["failing"]] == ["load_evidence", "signoffs"]
    release.refresh_from_db()
    assert release.state == Release.State.APPROVED
    assert not Event.objects.filter(action="release.rollout_started").exists()


def test_ending_a_window_that_has_ended_says_to_promote_instead(client, rolling, sre):
    observe(rolling, sre, GOOD)
    stage = Stage.objects.get(release=rolling, number=1)
    client.force_login(sre)
    url = reverse("releases:rollout_action", args=[rolling.pk, "end-window"])
    with time_machine.travel(stage.started_at + dt.timedelta(minutes=61)):
        response = client.get(url)
    assert response.status_code == 200
    assert response.context["refusal_ahead"] == (
        "The observation window of stage 1 has ended: promote it instead."
    )
    assert "has ended: promote it instead." in response.content.decode()


def test_an_observation_window_ending_before_it_starts_is_refused_beside_the_field(
    client, rolling, sre
):
    client.force_login(sre)
    end = timezone.localtime().replace(second=0, microsecond=0)
    response = client.post(
        reverse("releases:release_observation", args=[rolling.pk]),
        {
            "window_start": end.strftime("%Y-%m-%dT%H:%M"),
            "window_end": (end - dt.timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M"),
            "candidate_requests": "1200",
            "candidate_ttft_p95_ms": "640",
            "candidate_error_rate_pct": "0.2",
        },
    )
    assert response.status_code == 400
    assert response.context["form"].errors["window_end"] == ["The window must end after it starts."]
    assert not Observation.objects.exists()


def test_an_observation_of_a_rollout_that_ended_meanwhile_is_refused(client, rolling, sre):
    client.force_login(sre)
    form = client.get(reverse("releases:release_observation", args=[rolling.pk]))
    assert form.status_code == 200
    services.abort_release(rolling, actor=sre, reason="tenant support asked to stop")
    end = timezone.localtime().replace(second=0, microsecond=0)
    response = client.post(
        reverse("releases:release_observation", args=[rolling.pk]),
        {
            "window_start": (end - dt.timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M"),
            "window_end": end.strftime("%Y-%m-%dT%H:%M"),
            "candidate_requests": "1200",
            "candidate_ttft_p95_ms": "640",
            "candidate_error_rate_pct": "0.2",
        },
    )
    assert response.status_code == 400
    (refusal,) = response.context["form"].non_field_errors()
    assert refusal.startswith(f"Release #{rolling.pk} is aborted")
    assert not Observation.objects.exists()


# ---------------------------------------------------------------- how it ended


def test_the_close_page_corrects_how_a_release_ended_and_links_its_incidents(client, aborted, sre):
    url = reverse("releases:release_close", args=[aborted.pk])
    client.force_login(sre)
    form = client.get(url)
    assert form.status_code == 200
    assert form.context["form"]["close_code"].value() == "failed"  # as the abort set it
    response = client.post(
        url,
        {
            "close_code": "successful_with_issues",
            "note": "the canary's error rate doubled",
            "incidents": "INC-4412 https://tickets.example.com/INC-4412\nINC-4413",
        },
    )
    assert response.status_code == 302
    assert (
        response["Location"] == reverse("releases:release_detail", args=[aborted.pk]) + "#rollout"
    )
    assert _said(response) == [f"Saved how release #{aborted.pk} ended."]
    aborted.refresh_from_db()
    assert aborted.close_code == "successful_with_issues"
    assert aborted.close_note == "the canary's error rate doubled"
    assert aborted.incidents == [
        {"ticket": "INC-4412", "url": "https://tickets.example.com/INC-4412"},
        {"ticket": "INC-4413", "url": ""},
    ]
    event = Event.objects.get(action="release.closed")
    assert event.actor == sre
    # The incidents show again, one a line, when the page is opened next.
    again = client.get(url)
    assert again.context["form"]["incidents"].value() == (
        "INC-4412 https://tickets.example.com/INC-4412\nINC-4413"
    )


def test_an_incident_address_that_is_no_web_address_is_refused_beside_the_field(
    client, aborted, sre
):
    client.force_login(sre)
    response = client.post(
        reverse("releases:release_close", args=[aborted.pk]),
        {"close_code": "failed", "incidents": "INC-1 tickets/INC-1"},
    )
    assert response.status_code == 400
    assert response.context["form"].errors["incidents"] == [
        "incidents[0].url: expected an http(s) address, got 'tickets/INC-1'."
    ]
    aborted.refresh_from_db()
    assert aborted.incidents == []
    assert not Event.objects.filter(action="release.closed").exists()


def test_a_release_still_rolling_out_is_not_closed(client, rolling, sre):
    client.force_login(sre)
    response = client.post(
        reverse("releases:release_close", args=[rolling.pk]), {"close_code": "failed"}
    )
    assert response.status_code == 400
    (refusal,) = response.context["form"].non_field_errors()
    assert refusal.startswith(f"Release #{rolling.pk} is rolling out")
    rolling.refresh_from_db()
    assert rolling.close_code == ""
    assert not Event.objects.filter(action="release.closed").exists()


def test_an_auditor_may_not_correct_how_a_release_ended(client, aborted, auditor):
    client.force_login(auditor)
    url = reverse("releases:release_close", args=[aborted.pk])
    assert client.get(url).status_code == 403
    assert client.post(url, {"close_code": "rolled_back"}).status_code == 403
    aborted.refresh_from_db()
    assert aborted.close_code == "failed"
