"""One read of a rollout (`releases.governance.queries.rollout`): the release page, the promote
page, the incident screen and both APIs (the release's rollout, the service's incident)
say the same stage carries traffic, with the same share and state, and the same end of
its observation window."""

from __future__ import annotations

import pytest
from django.urls import reverse

from releases.governance import services
from releases.governance.queries.incident import incident, incident_service
from tests.releases.factories import roll_out
from tests.releases.test_api import client_for

pytestmark = pytest.mark.django_db


def _reads(client, world, release, sre) -> dict[str, tuple]:
    client.force_login(sre)
    page = client.get(reverse("releases:release_detail", args=[release.pk])).context["rollout"]
    screen = incident(incident_service(world.service.slug)).rollout
    api = client_for(sre)
    answer = api.get(f"/api/releases/{release.pk}/rollout/").json()
    stated = api.get(f"/api/services/{world.service.slug}/incident/").json()["rollout"]
    assert page is not None and page.current is not None and screen is not None
    return {
        "release page": (
            page.current.stage.number,
            page.traffic_pct,
            page.current.stage.state,
            page.held,
            page.breached,
        ),
        "incident screen": (
            screen.stage_number,
            screen.traffic_pct,
            screen.stage_state,
            screen.held,
            screen.breached,
        ),
        "rollout API": (
            answer["current_stage"],
            answer["traffic_pct"],
            next(s["state"] for s in answer["stages"] if s["number"] == answer["current_stage"]),
            answer["held"],
            answer["breached"],
        ),
        "incident API": (
            stated["stage"],
            stated["traffic_pct"],
            stated["stage_state"],
            stated["held"],
            stated["breached"],
        ),
    }


def test_every_reader_says_the_same_stage_carries_traffic(
    client, world, release, owner, signers, sre
):
    roll_out(release, owner, signers)
    observing = _reads(client, world, release, sre)
    assert set(observing.values()) == {(1, 5.0, "observing", False, False)}, observing

    services.hold_release(release, actor=sre, reason="a look at the dashboards")
    held = _reads(client, world, release, sre)
    assert set(held.values()) == {(1, 5.0, "held", True, False)}, held
    assert incident(incident_service(world.service.slug)).rollout.why == "a look at the dashboards"


def test_the_release_page_and_the_promote_page_read_one_window_end(
    client, world, release, owner, signers, sre
):
    roll_out(release, owner, signers)
    client.force_login(sre)
    page = client.get(reverse("releases:release_detail", args=[release.pk])).context["rollout"]
    promote = client.get(reverse("releases:rollout_action", args=[release.pk, "promote"]))
    assert promote.status_code == 200
    stage = page.current.stage
    assert page.current.window_ends_at is not None
    assert promote.context["window_ends_at"] == page.current.window_ends_at
    assert (page.current.window_ends_at - stage.started_at).total_seconds() == (
        stage.observation_minutes * 60
    )
