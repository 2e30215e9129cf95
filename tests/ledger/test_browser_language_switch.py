"""The top bar's language switcher changes this browser's language (a cookie), not the
account's stored preference; Preferences changes the account's (issue 27 item 8c)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from ledger.models import UserPreference
from tests.factories import PASSWORD

pytestmark = pytest.mark.browser


def log_in(page, live_server, user):
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill(user.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Welcome")


def test_switching_language_leaves_the_stored_preference_and_preferences_change_it(
    live_server, page, auditor
):
    UserPreference.objects.create(user=auditor, language="en")
    log_in(page, live_server, auditor)
    page.goto(f"{live_server.url}/events/")

    page.locator("#topbar-language").select_option("zh-hans")

    expect(page.locator("html")).to_have_attribute("lang", "zh-hans")
    expect(page).to_have_url(f"{live_server.url}/events/")
    cookies = {c["name"]: c["value"] for c in page.context.cookies()}
    assert cookies["django_language"] == "zh-hans"
    assert UserPreference.objects.get(user=auditor).language == "en"

    page.goto(f"{live_server.url}/preferences/")
    page.locator("#id_language").select_option("zh-hans")
    page.locator("main form button[type=submit]").click()

    expect(page.get_by_role("status")).to_contain_text("偏好")
    assert UserPreference.objects.get(user=auditor).language == "zh-hans"
