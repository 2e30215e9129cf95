"""The SRE's pages end to end through the client: the release page driving a rollout, the
rollback confirmation and record, the service page and incident screen putting a
breached stage's rollback first, playbooks changed in the browser, and the catalog's
readiness."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.urls import reverse
from django.utils import timezone

from ledger.models import Event
from releases.governance import services
from releases.governance.services.readiness import refresh_readiness
from releases.models import Observation, RollbackEvent, Runbook, Stage
from tests.releases.factories import file_release, observe, roll_out
from tests.replay.factories import ProbeFactory
from tests.replay.helpers import make_set, sample

pytestmark = pytest.mark.django_db

SLOW = {"requests": 1200, "ttft_p95_ms": 1400, "error_rate_pct": 0.2, "json_valid_pct": 99.5}
GOOD = {**SLOW, "ttft_p95_ms": 640}


@pytest.fixture
def rolling(release, owner, signers):
    return roll_out(release, owner, signers)


def page(client, user, url, **params):
    client.force_login(user)
    return client.get(url, params)


def test_the_release_page_shows_the_rollout_and_the_actions_the_reader_may_take(
    client, rolling, sre, owner
):
    url = reverse("releases:release_detail", args=[rolling.pk])
    as_sre = page(client, sre, url).content.decode()
    assert 'id="rollout"' in as_sre
    assert 'data-stage-state="observing"' in as_sre
    assert reverse("releases:rollout_action", args=[rolling.pk, "promote"]) in as_sre
    assert "Post an observation of stage 1" in as_sre
    as_owner = page(client, owner, url).content.decode()
    assert reverse("releases:rollout_action", args=[rolling.pk, "promote"]) not in as_owner
    assert reverse("releases:rollout_action", args=[rolling.pk, "hold"]) in as_owner


def test_an_observation_posted_in_the_browser_is_judged_and_shown(client, rolling, sre):
    client.force_login(sre)
    end = timezone.localtime().replace(second=0, microsecond=0)
    response = client.post(
        reverse("releases:release_observation", args=[rolling.pk]),
        {
            "window_start": (end - dt.timedelta(minutes=15)).strftime("%Y-%m-%dT%H:%M"),
            "window_end": end.strftime("%Y-%m-%dT%H:%M"),
            "candidate_requests": "1200",
            "candidate_ttft_p95_ms": "1400",
            "candidate_error_rate_pct": "0.2",
            "candidate_structured_error_rate_pct": "0.5",
            "baseline_ttft_p95_ms": "610",
            "source": "gateway dashboard",
        },
    )
    assert response.status_code == 302
    observation = Observation.objects.get()
    assert (observation.verdict, observation.source) == ("fail", "gateway dashboard")
    assert observation.baseline == {"ttft_p95_ms": 610.0}
    shown = client.get(reverse("releases:release_detail", args=[rolling.pk])).content.decode()
    assert "p95 TTFT 1,400 ms above the bound of 900 ms" in shown


def test_a_bad_observation_shows_the_form_again_naming_the_field(client, rolling, sre):
    client.force_login(sre)
    response = client.post(
        reverse("releases:release_observation", args=[rolling.pk]),
        {"window_start": "yesterday", "window_end": "", "candidate_error_rate_pct": "140"},
    )
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert "window_start" in errors and "window_end" in errors
    assert errors["candidate_error_rate_pct"] == ["Ensure this value is less than or equal to 100."]
    assert not Observation.objects.exists()


def test_the_release_page_fetches_the_observation_form_only_when_its_panel_opens(
    client, rolling, sre
):
    url = reverse("releases:release_observation", args=[rolling.pk])
    release_page = page(client, sre, reverse("releases:release_detail", args=[rolling.pk]))
    html = release_page.content.decode()
    assert f'hx-get="{url}" hx-trigger="toggle once"' in html
    assert f'<a href="{url}">Open the observation form</a>' in html  # without JavaScript
    assert 'name="candidate_ttft_p95_ms"' not in html

    fragment = client.get(url, headers={"HX-Request": "true"})
    assert fragment.status_code == 200
    assert fragment["Vary"].count("HX-Request") == 1
    body = fragment.content.decode()
    assert 'name="candidate_ttft_p95_ms"' in body and 'name="csrfmiddlewaretoken"' in body
    assert "<html" not in body

    whole = client.get(url).content.decode()
    assert "<html" in whole and 'name="candidate_ttft_p95_ms"' in whole
    assert "Stage 1 sends 5 % of traffic to" in whole


def test_the_observation_form_is_refused_to_readers_and_outside_a_rollout(
    client, world, rolling, auditor, owner
):
    client.force_login(auditor)
    assert client.get(reverse("releases:release_observation", args=[rolling.pk])).status_code == 403
    draft = file_release(world, owner)
    client.force_login(owner)
    response = client.get(reverse("releases:release_observation", args=[draft.pk]), follow=True)
    assert response.redirect_chain[-1][0].endswith(f"/releases/{draft.pk}/#rollout")
    assert "has no stage carrying traffic: there is nothing to observe" in (
        response.content.decode()
    )
    # The panel of a page read while the rollout ran gets the sentence, not a whole page.
    fragment = client.get(
        reverse("releases:release_observation", args=[draft.pk]), headers={"HX-Request": "true"}
    )
    assert fragment.status_code == 200
    assert fragment.content.decode() == (
        f'<p class="empty">Release #{draft.pk} has no stage carrying traffic: '
        "there is nothing to observe.</p>"
    )


def test_promote_is_confirmed_first_and_refused_with_its_reason(client, rolling, sre):
    url = reverse("releases:rollout_action", args=[rolling.pk, "promote"])
    confirm = page(client, sre, url)
    assert confirm.status_code == 200
    assert "has guards but no observation yet" in confirm.content.decode()
    refused = client.post(url)
    assert refused.status_code == 409
    assert Stage.objects.get(release=rolling, number=1).state == "observing"
    observe(rolling, sre, GOOD)
    stage = Stage.objects.get(release=rolling, number=1)
    with time_machine.travel(stage.started_at + dt.timedelta(minutes=61)):
        done = client.post(url)
    assert done.status_code == 302
    assert Stage.objects.get(release=rolling, number=2).state == "observing"


def test_hold_and_abort_need_a_reason(client, rolling, sre):
    client.force_login(sre)
    hold = reverse("releases:rollout_action", args=[rolling.pk, "hold"])
    missing = client.post(hold, {"reason": ""})
    assert missing.status_code == 400
    assert "reason" in missing.context["form"].errors
    assert client.post(hold, {"reason": "tenant support asked to wait"}).status_code == 302
    assert Stage.objects.get(release=rolling, number=1).state == "held"
    abort = reverse("releases:rollout_action", args=[rolling.pk, "abort"])
    assert client.post(abort, {"reason": "not this quarter"}).status_code == 302
    rolling.refresh_from_db()
    assert rolling.state == "aborted"


def test_an_auditor_may_not_act_on_a_rollout(client, rolling, auditor):
    client.force_login(auditor)
    for action in ("promote", "hold", "abort"):
        url = reverse("releases:rollout_action", args=[rolling.pk, action])
        assert client.get(url).status_code == 403
        assert client.post(url, {"reason": "x"}).status_code == 403
    assert (
        client.post(reverse("releases:release_observation", args=[rolling.pk])).status_code == 403
    )


def test_a_breached_stage_puts_roll_back_first_on_the_release_service_and_incident_pages(
    client, world, rolling, sre
):
    observe(rolling, sre, SLOW)
    observe(rolling, sre, SLOW)
    assert Stage.objects.get(release=rolling, number=1).state == "breached"
    rollback_url = reverse("releases:rollback_new", args=[world.service.slug])
    for url in (
        reverse("releases:release_detail", args=[rolling.pk]),
        reverse("releases:service_detail", args=[world.service.slug]),
        reverse("releases:incident", args=[world.service.slug]),
    ):
        html = page(client, sre, url).content.decode()
        first = html.index("Roll back first")
        assert first < html.index("<h2", html.index("</nav>")) + 200, url
        assert rollback_url in html[first : first + 1500], url


def test_the_rollback_page_shows_where_it_goes_and_what_changes_then_records_it(
    client, world, release, owner, signers, sre
):
    from tests.releases.test_rollbacks import release_fully

    release_fully(roll_out(release, owner, signers), sre)
    make_set(world.verification_set.name, [sample("v1", "fake: reply=ok")])
    url = reverse("releases:rollback_new", args=[world.service.slug])
    confirm = page(client, sre, url, symptom="slow_first_token")
    html = confirm.content.decode()
    assert confirm.status_code == 200
    assert f"What changes going back: {world.candidate.label} → {world.live.label}" in html
    assert confirm.context["form"]["target_revision"].value() == world.live.pk
    assert confirm.context["readiness"].target == world.live
    response = client.post(
        url,
        {
            "target_revision": str(world.live.pk),
            "symptom": "slow_first_token",
            "reason": "p95 TTFT 2.1 s for tenant support",
        },
    )
    rollback = RollbackEvent.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse(
        "releases:rollback_detail", args=[world.service.slug, rollback.pk]
    )
    world.service.refresh_from_db()
    assert world.service.live_revision == world.live
    detail = client.get(response["Location"]).content.decode()
    assert 'data-rollback-state="verifying"' in detail


def test_the_rollback_page_is_refused_to_those_without_the_permission(client, world, owner):
    assert (
        page(client, owner, reverse("releases:rollback_new", args=[world.service.slug])).status_code
        == 403
    )
    assert (
        client.post(
            reverse("releases:rollback_new", args=[world.service.slug]), {"reason": "x"}
        ).status_code
        == 403
    )
    assert not RollbackEvent.objects.exists()


def test_a_rollback_nothing_verifies_is_confirmed_on_its_page(client, world, rolling, sre):
    world.live_backend.enabled = False
    world.live_backend.save(update_fields=["enabled"])
    rollback = services.record_rollback(world.service, actor=sre, reason="canary errors")
    url = reverse("releases:rollback_detail", args=[world.service.slug, rollback.pk])
    html = page(client, sre, url).content.decode()
    assert "How did it go?" in html
    confirm = reverse("releases:rollback_confirm", args=[world.service.slug, rollback.pk])
    bad = client.post(confirm, {"succeeded": "yes", "note": ""})
    assert bad.status_code == 400
    ok = client.post(confirm, {"succeeded": "yes", "note": "errors back under 1 %"})
    assert ok.status_code == 302
    rollback.refresh_from_db()
    assert rollback.state == "succeeded"


def test_an_unauthorized_change_shows_until_reconciled_on_the_service_page(
    client, world, release, owner, signers, sre
):
    from tests.releases.test_rollbacks import release_fully

    release_fully(roll_out(release, owner, signers), sre)
    ProbeFactory(
        backend=world.candidate_backend,
        drift=[{"what": "engine_version", "registered": "0.6.3", "reported": "0.7.1"}],
    )
    (change,) = services.record_unauthorized_changes()
    for url in (
        reverse("releases:service_detail", args=[world.service.slug]),
        reverse("releases:incident", args=[world.service.slug]),
    ):
        html = page(client, sre, url).content.decode()
        assert "unauthorized change" in html
        assert "0.7.1" in html
    reconcile = reverse("releases:unauthorized_reconcile", args=[world.service.slug, change.pk])
    response = client.post(reconcile, {"note": "node 7 restarted with the registered image"})
    assert response.status_code == 302
    change.refresh_from_db()
    assert change.reconciled_by == sre
    html = client.get(
        reverse("releases:service_detail", args=[world.service.slug])
    ).content.decode()
    assert 'id="unauthorized"' not in html


def test_a_service_overrides_a_playbook_in_the_browser_and_goes_back_to_the_default(
    client, world, owner, sre
):
    url = reverse("releases:playbook_edit", args=[world.service.slug, "slow_first_token"])
    client.force_login(sre)
    form = client.get(url)
    assert "Gateway queue" in form.context["form"]["diagnosis"].value()
    response = client.post(
        url,
        {"diagnosis": "Check the vector store first\nThen the gateway", "recovery": "Roll back"},
    )
    assert response.status_code == 302
    assert Runbook.objects.get(service=world.service).playbooks["slow_first_token"] == {
        "diagnosis": ["Check the vector store first", "Then the gateway"],
        "recovery": ["Roll back"],
    }
    incident = client.get(
        reverse("releases:incident", args=[world.service.slug]), {"symptom": "slow_first_token"}
    ).content.decode()
    assert "Check the vector store first" in incident
    event = Event.objects.get(action="service.playbook_changed")
    assert event.payload_data["before"] is None
    client.post(url, {"action": "default"})
    assert Runbook.objects.get(service=world.service).playbooks == {}
    incident = client.get(
        reverse("releases:incident", args=[world.service.slug]), {"symptom": "slow_first_token"}
    ).content.decode()
    assert "Check the vector store first" not in incident


def test_playbooks_of_another_team_are_not_editable(client, world, outsider, auditor):
    for person in (outsider, auditor):
        client.force_login(person)
        url = reverse("releases:playbook_edit", args=[world.service.slug, "kv_cache_oom"])
        assert client.get(url).status_code == 403
        assert client.post(url, {"diagnosis": "x", "recovery": "y"}).status_code == 403
    assert not Runbook.objects.exists()


def test_the_catalog_shows_and_filters_rollback_readiness(
    client, world, release, owner, signers, sre
):
    from tests.ledger.factories import ServiceFactory

    lonely = ServiceFactory(slug="lonely", team=world.service.team)
    refresh_readiness(world.service.pk)
    refresh_readiness(lonely.pk)
    verdict = world.service.readiness_record.verdict
    client.force_login(sre)
    listed = client.get(reverse("releases:service_list"), {"readiness": "not ready"})
    slugs = [s.slug for s in listed.context["page"].object_list]
    assert slugs == sorted(["lonely", *(["kb-assistant"] if verdict == "not ready" else [])])
    roll_out(release, owner, signers)
    rolling = client.get(reverse("releases:service_list"), {"rollout": "in_flight"})
    assert [s.slug for s in rolling.context["page"].object_list] == ["kb-assistant"]
    assert "rolling out 5 %" in rolling.content.decode()


def test_home_puts_a_breached_rollout_first_for_whoever_may_roll_back(
    client, world, rolling, sre, outsider
):
    observe(rolling, sre, SLOW)
    observe(rolling, sre, SLOW)
    client.force_login(sre)
    items = client.get(reverse("home")).context["attention"].items
    assert items[0].urgency == "act"
    assert items[0].text.startswith(f"roll back: a guard breached stage 1 of release #{rolling.pk}")
    assert items[0].url == reverse("releases:incident", args=[world.service.slug])
    client.force_login(outsider)
    assert client.get(reverse("home")).context["attention"].items == []
