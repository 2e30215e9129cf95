import pytest
from playwright.sync_api import expect

from tests.factories import PASSWORD

pytestmark = pytest.mark.browser


def test_person_logs_in_through_the_browser_and_sees_the_navigation(live_server, page, owner):
    page.goto(live_server.url)
    expect(page).to_have_url(f"{live_server.url}/accounts/login/?next=/")

    page.get_by_label("Username").fill(owner.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()

    nav = page.get_by_role("navigation", name="Main")
    expect(nav.get_by_role("link", name="Home")).to_be_visible()
    expect(nav.get_by_role("link", name="API")).to_be_visible()
    expect(page.get_by_role("button", name="Log out")).to_be_visible()
    assert page.evaluate("typeof window.htmx") == "object", "vendored htmx loaded"


def test_pages_fit_a_phone_without_sideways_scrolling(live_server, page, owner):
    page.set_viewport_size({"width": 375, "height": 740})
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill(owner.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Welcome")

    assert page.evaluate("document.documentElement.scrollWidth") <= 375
