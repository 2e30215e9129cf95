"""What the rollout pages say and offer (issue 27, item 6): promoting into 100 %, a
promotion that will be refused, ending an observation window early, an observation's
default window, a start before the planned start, an abort's readiness."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.contrib.messages import get_messages
from django.urls import reverse
from django.utils import timezone

from ledger.models import Event
from releases import services
from releases.models import Release, Stage
from tests.releases.factories import observe, roll_out

pytestmark = pytest.mark.django_db

GOOD = {
    "requests": 1200,
    "ttft_p95_ms": 640,
    "error_rate_pct": 0.2,
    "structured_error_rate_pct": 0.5,
}


@pytest.fixture
def rolling(release, owner, signers):
    return roll_out(release, owner, signers)


def _said(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def _after_window(release: Release) -> dt.datetime:
    stage = Stage.objects.get(release=release, state__in=Stage.ACTIVE_STATES)
    assert stage.started_at is not None
    return stage.started_at + dt.timedelta(minutes=stage.observation_minutes + 1)


def test_promoting_into_full_traffic_says_the_candidate_is_live(client, world, rolling, sre):
    client.force_login(sre)
    url = reverse("releases:rollout_action", args=[rolling.pk, "promote"])
    observe(rolling, sre, GOOD)
    with time_machine.travel(_after_window(rolling)):
        first = client.post(url)
    assert _said(first) == ["Promoted: stage 2 carries 25 % of traffic."]
    observe(rolling, sre, GOOD)
    with time_machine.travel(_after_window(rolling)):
        last = client.post(url)
    rolling.refresh_from_db()
    assert rolling.state == Release.State.RELEASED
    assert _said(last)[-1] == (
        f"Released: {world.candidate.label} is live on {world.service.slug} (stage 3 carries "
        "100 % of traffic)."
    )


def test_promote_release_returns_the_release_as_it_ends(world, rolling, sre):
    observe(rolling, sre, GOOD)
    with time_machine.travel(_after_window(rolling)):
        services.promote_release(rolling, actor=sre)
    observe(rolling, sre, GOOD)
    with time_machine.travel(_after_window(rolling)):
        result = services.promote_release(rolling, actor=sre)
    assert result.state == Release.State.RELEASED


def test_an_observations_default_window_starts_no_earlier_than_its_stage(client, rolling, sre):
    stage = Stage.objects.get(release=rolling, number=1)
    client.force_login(sre)
    url = reverse("releases:release_observation", args=[rolling.pk])
    with time_machine.travel(stage.started_at + dt.timedelta(minutes=5)):
        form = client.get(url).context["form"]
    assert form.initial["window_start"] >= stage.started_at.replace(microsecond=0)
    assert form.initial["window_end"] > form.initial["window_start"]
    # Long after the stage began, the last quarter of an hour.
    with time_machine.travel(stage.started_at + dt.timedelta(minutes=50)):
        form = client.get(url).context["form"]
    assert form.initial["window_end"] - form.initial["window_start"] == dt.timedelta(minutes=15)


def test_the_structured_output_guard_and_the_observation_field_share_one_name(client, rolling, sre):
    from releases.forms.rollout import ObservationForm
    from releases.guards import GUARD_METRICS

    labels = [str(field.label) for field in ObservationForm().fields.values()]
    for metric in ("structured_error_rate_pct", "error_rate_pct", "ttft_p95_ms"):
        name = GUARD_METRICS[metric].label
        assert any(name in label for label in labels), (metric, name)
    assert not any("JSON" in label for label in labels)
    client.force_login(sre)
    end = timezone.localtime().replace(second=0, microsecond=0)
    response = client.post(
        reverse("releases:release_observation", args=[rolling.pk]),
        {
            "window_start": (end - dt.timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M"),
            "window_end": end.strftime("%Y-%m-%dT%H:%M"),
            "candidate_requests": "1200",
            "candidate_ttft_p95_ms": "640",
            "candidate_error_rate_pct": "0.2",
            "candidate_structured_error_rate_pct": "3.5",
        },
    )
    assert response.status_code == 302
    stage = Stage.objects.get(release=rolling, number=1)
    result = next(
        r
        for r in stage.observations.get().guard_results
        if r["metric"] == "structured_error_rate_pct"
    )
    assert (result["status"], result["value"]) == ("fail", 3.5)


def test_an_observation_posted_with_the_older_json_valid_rate_is_still_read(rolling, sre):
    assert observe(rolling, sre, GOOD).verdict == "pass"
    older = {"requests": 1200, "ttft_p95_ms": 640, "error_rate_pct": 0.2, "json_valid_pct": 97}
    result = next(
        r
        for r in observe(rolling, sre, older).guard_results
        if r["metric"] == "structured_error_rate_pct"
    )
    assert (result["status"], result["value"]) == ("fail", 3.0)
