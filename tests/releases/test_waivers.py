"""Waivers: bounded per tier, and how long each has left (issue 26, item 4).

Each attack of the issue is reproduced through the verb, the API and the page.
"""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils import timezone

from ledger.models import Event
from releases import services
from releases.models import Waiver
from tests.releases.factories import build_world, file_release
from tests.releases.test_api import client_for

pytestmark = pytest.mark.django_db

SOON = dt.timedelta(days=3)


def _waive(release, actor, gate, *, after=SOON, reason="re-measured on Monday"):
    return services.grant_waiver(
        release, actor=actor, gate=gate, reason=reason, expires_at=timezone.now() + after
    )


def _stamp(moment: dt.datetime) -> str:
    return f"{timezone.localtime(moment):%Y-%m-%d %H:%M %Z}"


# ---------------------------------------------------------------- 4. bounded per tier


def test_a_waiver_cannot_last_until_9999(world, release, sre):
    world.reports["short"].delete()
    events = Event.objects.count()
    now = timezone.now()
    with time_machine.travel(now, tick=False), pytest.raises(ValidationError) as caught:
        services.grant_waiver(
            release,
            actor=sre,
            gate="load_evidence",
            reason="forever",
            expires_at=dt.datetime(9999, 12, 31, 23, 59, tzinfo=dt.UTC),
        )
    assert caught.value.message_dict == {
        "expires_at": [
            "A waiver on a production service may last at most 14 days: until "
            f"{_stamp(now + dt.timedelta(days=14))}; 9999-12-31 23:59 UTC is later."
        ]
    }
    assert not Waiver.objects.exists()
    assert Event.objects.count() == events


def test_the_bound_is_the_tiers_from_settings_up_to_the_minute(team, owner, sre, settings):
    internal = build_world(team, tier="internal", slug="sql-agent")
    release = file_release(internal, owner)
    now = timezone.now()
    with time_machine.travel(now, tick=False):
        with pytest.raises(ValidationError, match="an internal service may last at most 30 days"):
            _waive(release, sre, "load_evidence", after=dt.timedelta(days=30, minutes=1))
        settings.WAIVER_MAX_DAYS = {**settings.WAIVER_MAX_DAYS, "internal": 2}
        with pytest.raises(ValidationError, match="an internal service may last at most 2 days"):
            _waive(release, sre, "load_evidence", after=dt.timedelta(days=2, minutes=1))
        waiver = _waive(release, sre, "load_evidence", after=dt.timedelta(days=2))
    assert waiver.expires_at == now + dt.timedelta(days=2)


def test_the_api_refuses_a_waiver_past_the_bound_with_a_400_naming_it(world, release, sre):
    world.reports["short"].delete()
    response = client_for(sre).post(
        f"/api/releases/{release.pk}/waivers/",
        {"gate": "load_evidence", "reason": "forever", "expires_at": "9999-12-31T23:59:00Z"},
        format="json",
    )
    assert response.status_code == 400
    (message,) = response.json()["expires_at"]
    assert message.startswith("A waiver on a production service may last at most 14 days: until ")
    assert not Waiver.objects.exists()


def test_the_form_names_the_bound_and_refuses_past_it_beside_the_field(
    client, owner, world, security
):
    release = file_release(world, owner, logging_policy={})
    client.force_login(security)
    page = client.get(reverse("releases:release_detail", args=[release.pk])).content.decode()
    assert "At most 14 days on this production service: until " in page

    response = client.post(
        reverse("releases:release_waiver", args=[release.pk]),
        {"gate": "logging_policy", "reason": "forever", "expires_at": "9999-12-31T23:59"},
    )
    assert response.status_code == 400
    errors = response.context["waiver_form"].errors
    assert errors["expires_at"][0].startswith(
        "A waiver on a production service may last at most 14 days: until "
    )
    assert not Waiver.objects.exists()


def test_the_release_page_shows_how_long_each_waiver_has_left(client, owner, world, security):
    release = file_release(world, owner, logging_policy={})
    waiver = _waive(release, security, "logging_policy", after=dt.timedelta(days=3, hours=1))
    client.force_login(owner)
    url = reverse("releases:release_detail", args=[release.pk])

    html = client.get(url).content.decode()
    waivers = html[html.index('id="waivers"') :]
    assert "3 days left" in waivers
    assert f'<time datetime="{timezone.localtime(waiver.expires_at).isoformat()}">' in waivers
    gate = html[html.index('id="gate-logging_policy"') :]
    assert "3 days left" in gate[: gate.index("</li>")]

    with time_machine.travel(waiver.expires_at + dt.timedelta(hours=5)):
        html = client.get(url).content.decode()
    waivers = html[html.index('id="waivers"') : html.index("</div>", html.index('id="waivers"'))]
    assert "expired" in waivers and "left" not in waivers
    assert 'data-gate="logging_policy" data-status="fail"' in html


@pytest.mark.parametrize(
    ("left", "words"),
    [
        (dt.timedelta(days=1, hours=2), "1 day left"),
        (dt.timedelta(hours=5, minutes=10), "5 h left"),
        (dt.timedelta(minutes=12, seconds=30), "12 min left"),
        (dt.timedelta(seconds=20), "1 min left"),
        (dt.timedelta(0), "expired"),
    ],
)
def test_time_left_reads_in_words(left, words):
    from releases.templatetags.release_format import time_left

    now = timezone.now()
    with time_machine.travel(now, tick=False):
        assert time_left(now + left).text == words
