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
from releases.governance import services
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
    from releases.governance.forms.rollout import ObservationForm
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


def _confirm_page(client, user, release):
    client.force_login(user)
    return client.get(reverse("releases:rollout_action", args=[release.pk, "promote"]))


def test_a_promotion_the_window_refuses_is_not_offered_and_says_when_it_can_be(
    client, rolling, sre
):
    observe(rolling, sre, GOOD)
    stage = Stage.objects.get(release=rolling, number=1)
    ends = timezone.localtime(stage.started_at + dt.timedelta(minutes=60))
    html = _confirm_page(client, sre, rolling).content.decode()
    assert "The observation window of stage 1 ends at <time" in html
    assert f">{ends:%Y-%m-%d %H:%M %Z}</time>: it can be promoted from then on" in html
    form = html[html.index('<form method="post"') :]
    assert "<button" not in form[: form.index("</form>")]  # no doomed Promote button
    assert reverse("releases:rollout_action", args=[rolling.pk, "hold"]) in html
    assert reverse("releases:rollout_action", args=[rolling.pk, "end-window"]) in html
    # Once the window has ended the page offers Promote and nothing else.
    with time_machine.travel(_after_window(rolling)):
        html = _confirm_page(client, sre, rolling).content.decode()
    assert '<button type="submit" class="primary">Promote</button>' in html
    assert reverse("releases:rollout_action", args=[rolling.pk, "end-window"]) not in html


def test_a_promotion_refused_for_its_guards_offers_no_early_end(client, rolling, sre):
    html = _confirm_page(client, sre, rolling).content.decode()  # no observation yet
    assert "has guards but no observation yet" in html
    assert reverse("releases:rollout_action", args=[rolling.pk, "end-window"]) not in html
    assert reverse("releases:rollout_action", args=[rolling.pk, "hold"]) in html


def test_platform_ends_the_window_now_with_a_reason_and_the_stage_is_promoted(client, rolling, sre):
    observe(rolling, sre, GOOD)
    client.force_login(sre)
    url = reverse("releases:rollout_action", args=[rolling.pk, "end-window"])
    confirm = client.get(url)
    assert confirm.status_code == 200
    assert "ends the observation window of stage 1 now" in confirm.content.decode()
    missing = client.post(url, {"reason": ""})
    assert missing.status_code == 400
    assert "reason" in missing.context["form"].errors
    assert Stage.objects.get(release=rolling, number=1).state == "observing"
    done = client.post(url, {"reason": "tenant support signed off the canary at 14:05"})
    assert done.status_code == 302
    assert Stage.objects.get(release=rolling, number=1).state == "promoted"
    assert Stage.objects.get(release=rolling, number=2).state == "observing"
    ended = Event.objects.get(action="release.stage_window_ended")
    payload = ended.payload_data
    assert payload["stage"] == 1 and payload["observation_minutes"] == 60
    assert payload["reason"] == "tenant support signed off the canary at 14:05"
    assert Event.objects.filter(action="release.promoted", sequence__gt=ended.sequence).exists()
    assert _said(done)[-1] == (
        "Ended the observation window of stage 1 early: stage 2 carries 25 % of traffic."
    )


def test_ending_the_window_early_is_refused_to_anyone_but_platform_and_on_failing_guards(
    client, world, rolling, sre, owner
):
    from django.contrib.auth.models import Permission

    from tests.factories import UserFactory

    gateway = UserFactory(username="gateway-bot", roles=[])
    gateway.user_permissions.add(Permission.objects.get(codename="promote_release"))
    url = reverse("releases:rollout_action", args=[rolling.pk, "end-window"])
    for person in (owner, gateway):
        client.force_login(person)
        assert client.get(url).status_code == 403
        assert client.post(url, {"reason": "now"}).status_code == 403
    observe(rolling, sre, {**GOOD, "ttft_p95_ms": 1400})  # a failing guard within budget
    client.force_login(sre)
    refused = client.post(url, {"reason": "looks fine to me"})
    assert refused.status_code == 409
    assert "Wait for a passing observation, or roll back" in refused.content.decode()
    assert not Event.objects.filter(action="release.stage_window_ended").exists()


def test_the_api_ends_the_window_as_the_page_does(client, rolling, sre, owner):
    observe(rolling, sre, GOOD)
    url = f"/api/releases/{rolling.pk}/end-window/"
    client.force_login(owner)
    assert client.post(url, {"reason": "x"}, content_type="application/json").status_code == 403
    client.force_login(sre)
    empty = client.post(url, {}, content_type="application/json")
    assert empty.status_code == 400 and "reason" in empty.json()
    done = client.post(url, {"reason": "the canary is fine"}, content_type="application/json")
    assert done.status_code == 200
    assert Stage.objects.get(release=rolling, number=2).state == "observing"


def test_aborting_a_canary_is_not_rated_on_the_live_revisions_evidence(world, rolling):
    from releases.governance.queries.plan import plan_readiness, rollback_plan

    plan = rollback_plan(world.service)
    assert plan.in_flight and plan.target == world.live  # an abort goes back to what serves
    readiness = plan_readiness(world.service, plan)
    texts = [reason.text for reason in readiness.reasons]
    assert not [t for t in texts if "load-test evidence" in t], texts
    assert readiness.verdict == "ready", texts


def _approved_planned(release, owner, signers, *, in_hours: float) -> Release:
    from tests.releases.factories import approve

    Release.objects.filter(pk=release.pk).update(
        planned_start=timezone.now() + dt.timedelta(hours=in_hours)
    )
    release.refresh_from_db()
    return approve(release, owner, signers)


def test_starting_two_days_early_warns_and_needs_a_reason(client, release, owner, signers):
    approved = _approved_planned(release, owner, signers, in_hours=48)
    client.force_login(owner)
    url = reverse("releases:rollout_action", args=[approved.pk, "start"])
    html = client.get(url).content.decode()
    planned = timezone.localtime(approved.planned_start)
    assert "is planned to start at <time" in html
    assert f">{planned:%Y-%m-%d %H:%M %Z}</time>, 2 days from now." in html
    assert 'name="early_reason"' in html
    refused = client.post(url, {"early_reason": ""})
    assert refused.status_code == 400
    assert refused.context["form"].errors["early_reason"]
    approved.refresh_from_db()
    assert approved.state == Release.State.APPROVED
    started = client.post(url, {"early_reason": "the tenant asked for it before the weekend"})
    assert started.status_code == 302
    approved.refresh_from_db()
    assert approved.state == Release.State.ROLLING_OUT
    payload = Event.objects.get(action="release.rollout_started").payload_data
    assert payload["early_reason"] == "the tenant asked for it before the weekend"
    assert payload["planned_start"]


def test_the_verb_refuses_an_early_start_without_a_reason_and_not_an_on_time_one(
    release, owner, signers
):
    from django.core.exceptions import ValidationError

    approved = _approved_planned(release, owner, signers, in_hours=48)
    with pytest.raises(ValidationError) as refused:
        services.start_rollout(approved, actor=owner)
    assert "is planned to start at" in refused.value.message_dict["early_reason"][0]
    with time_machine.travel(approved.planned_start - dt.timedelta(minutes=5)):
        services.start_rollout(approved, actor=owner)  # within the tolerance: on time
    approved.refresh_from_db()
    assert approved.state == Release.State.ROLLING_OUT


def test_a_start_on_or_after_the_planned_start_asks_nothing(client, release, owner, signers):
    approved = _approved_planned(release, owner, signers, in_hours=-1)
    client.force_login(owner)
    url = reverse("releases:rollout_action", args=[approved.pk, "start"])
    assert 'name="early_reason"' not in client.get(url).content.decode()
    assert client.post(url).status_code == 302


def test_the_api_starts_early_only_with_a_reason(client, release, owner, signers):
    approved = _approved_planned(release, owner, signers, in_hours=48)
    client.force_login(owner)
    url = f"/api/releases/{approved.pk}/start/"
    refused = client.post(url, {}, content_type="application/json")
    assert refused.status_code == 400 and "early_reason" in refused.json()
    started = client.post(url, {"early_reason": "pulled forward"}, content_type="application/json")
    assert started.status_code == 200
