"""A reader's language and time zone: their preference, else the switcher or the browser.

Times are stored in UTC and shown in the reader's zone, named on the page; exports
stay UTC whatever the reader's zone.
"""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.test import Client
from django.utils import timezone

from ledger import services
from ledger.exports.tabular import csv_lines
from ledger.models import UserPreference
from tests.factories import PASSWORD
from tests.ledger.factories import RevisionFactory, ServiceFactory


@pytest.fixture
def march_event(owner, team):
    """An event at 2026-03-05 12:00 UTC."""
    service = ServiceFactory(team=team, slug="kb-assistant", name="KB")
    RevisionFactory(service=service)
    with time_machine.travel("2026-03-05 12:00Z"):
        services.update_service(service, actor=owner, name="Knowledge base")
    return service


def _login(client: Client, user, password: str = PASSWORD) -> None:
    """Through the login page, as a person does: the preference is read at login."""
    user.set_password(password)
    user.save()
    response = client.post("/accounts/login/", {"username": user.username, "password": password})
    assert response.status_code == 302


def test_times_show_in_the_users_zone_and_the_zone_is_named(client, auditor, march_event):
    UserPreference.objects.create(user=auditor, time_zone="Asia/Shanghai")
    _login(client, auditor)

    page = client.get("/events/").content.decode()

    assert "2026-03-05 20:00 CST" in page
    assert "2026-03-05 12:00 UTC" not in page
    assert "Times are in Asia/Shanghai" in page


def test_without_a_preference_the_browsers_zone_is_used_then_the_default(
    client, auditor, march_event
):
    client.force_login(auditor)
    assert "2026-03-05 12:00 UTC" in client.get("/events/").content.decode()

    client.cookies["tz"] = "America/New_York"
    page = client.get("/events/").content.decode()
    assert "2026-03-05 07:00 EST" in page
    assert "Times are in America/New_York" in page

    client.cookies["tz"] = "Not/AZone<script>"
    page = client.get("/events/").content.decode()
    assert "2026-03-05 12:00 UTC" in page
    assert "Not/AZone" not in page


def test_the_users_zone_outranks_the_browsers(client, auditor, march_event):
    UserPreference.objects.create(user=auditor, time_zone="Europe/Berlin")
    _login(client, auditor)
    client.cookies["tz"] = "America/New_York"

    assert "2026-03-05 13:00 CET" in client.get("/events/").content.decode()


def test_the_language_follows_the_browser_then_the_users_preference(client, auditor):
    client.force_login(auditor)
    assert '<html lang="en">' in client.get("/", HTTP_ACCEPT_LANGUAGE="en-US").content.decode()
    chinese = client.get("/", HTTP_ACCEPT_LANGUAGE="zh-CN,zh;q=0.9").content.decode()
    assert '<html lang="zh-hans">' in chinese
    assert "推理发布台账" in chinese

    UserPreference.objects.create(user=auditor, language="en")
    _login(client, auditor)
    page = client.get("/", HTTP_ACCEPT_LANGUAGE="zh-CN,zh;q=0.9").content.decode()
    assert '<html lang="en">' in page


def test_the_switcher_sets_the_cookie_and_leaves_the_users_preference(client, auditor):
    client.force_login(auditor)

    response = client.post("/preferences/language", {"language": "zh-hans", "next": "/events/"})

    assert response.status_code == 302
    assert response["Location"] == "/events/"
    assert response.cookies["django_language"].value == "zh-hans"
    assert not UserPreference.objects.filter(user=auditor).exists()
    assert '<html lang="zh-hans">' in client.get("/events/").content.decode()


def test_the_switcher_outranks_a_stored_preference_in_this_session_only(client, auditor):
    UserPreference.objects.create(user=auditor, language="en")
    _login(client, auditor)

    client.post("/preferences/language", {"language": "zh-hans", "next": "/"})

    assert '<html lang="zh-hans">' in client.get("/events/").content.decode()
    assert UserPreference.objects.get(user=auditor).language == "en"
    client.post("/accounts/logout/")
    _login(client, auditor)
    assert '<html lang="en">' in client.get("/events/").content.decode()


@pytest.mark.parametrize(
    "posted",
    [{"language": "fr", "next": "/"}, {"language": "\x00", "next": "/"}, {}],
)
def test_the_switcher_refuses_an_unknown_language_without_saving(client, auditor, posted):
    client.force_login(auditor)

    response = client.post("/preferences/language", posted, follow=True)

    assert response.status_code == 200
    page = response.content.decode()
    assert "Language" in page or "This field is required." in page
    if posted.get("language") == "fr":
        assert "&#x27;fr&#x27; is not one of the choices of Language; choose one of: en" in page
        assert "zh-hans (简体中文)" in page
    assert not UserPreference.objects.filter(user=auditor).exists()


def test_the_switcher_never_redirects_off_site_and_refuses_a_get(client):
    response = client.post(
        "/preferences/language", {"language": "zh-hans", "next": "https://evil.example/"}
    )
    assert response.status_code == 302
    assert response["Location"] == "/"
    assert client.get("/preferences/language").status_code == 405


def test_the_preferences_page_saves_and_refuses_a_zone_naming_the_field(client, owner):
    client.force_login(owner)

    refused = client.post("/preferences/", {"language": "", "time_zone": "Mars/Olympus"})
    assert refused.status_code == 200
    assert "“Mars/Olympus” is not a time zone name" in refused.content.decode()
    assert not UserPreference.objects.filter(user=owner).exists()

    saved = client.post("/preferences/", {"language": "zh-hans", "time_zone": "Asia/Shanghai"})
    assert saved.status_code == 302
    preference = UserPreference.objects.get(user=owner)
    assert (preference.language, preference.time_zone) == ("zh-hans", "Asia/Shanghai")
    page = client.get("/preferences/").content.decode()
    assert "偏好设置" in page
    assert "Asia/Shanghai" in page


def test_the_preferences_page_asks_for_a_login(client):
    response = client.get("/preferences/")
    assert response.status_code == 302
    assert "/accounts/login/" in response["Location"]


def test_a_preference_costs_no_query_per_page(client, auditor):
    UserPreference.objects.create(user=auditor, language="zh-hans", time_zone="Asia/Shanghai")
    _login(client, auditor)
    baseline = Client()
    baseline.force_login(auditor)
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as plain:
        baseline.get("/preferences/")
    with CaptureQueriesContext(connection) as chosen:
        client.get("/preferences/")
    assert len(chosen) == len(plain)


def test_exports_stay_utc_whatever_the_readers_zone():
    moment = dt.datetime(2026, 3, 5, 20, 0, tzinfo=dt.timezone(dt.timedelta(hours=8)))
    with timezone.override("Asia/Shanghai"):
        lines = "".join(csv_lines(["at"], [[moment], [timezone.localtime(moment)]]))

    assert lines.splitlines()[1:] == [
        "2026-03-05T12:00:00+00:00",
        "2026-03-05T12:00:00+00:00",
    ]
