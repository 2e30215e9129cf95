"""The price sheets page in a browser: on a phone, with and without JavaScript, an SRE
fixes a refused field and records a price; the navigation still fits a desktop bar."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from ledger.models import PriceSheet
from tests.factories import PASSWORD
from tests.ledger.factories import RevisionFactory, RuntimeFactory

pytestmark = pytest.mark.browser


def log_in(page, live_server, user):
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill(user.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Welcome")


def screenshot(page, name: str) -> None:
    folder = os.environ.get("EVIDENCE_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


def no_sideways_scroll(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth") <= page.viewport_size["width"]


@pytest.fixture
def fleet(team):
    RevisionFactory(
        service__team=team,
        service__slug="kb-assistant",
        runtime=RuntimeFactory(team=team, name="vllm-0-6-3-h100-tp2", gpu_model="H100-80GB"),
    )
    RuntimeFactory(team=team, name="vllm-0-6-3-l4", gpu_model="L4-24GB")


@pytest.mark.parametrize("javascript", [True, False])
def test_an_sre_records_a_price_on_a_phone(live_server, browser, sre, fleet, javascript):
    context = browser.new_context(
        java_script_enabled=javascript, viewport={"width": 375, "height": 812}
    )
    try:
        page = context.new_page()
        log_in(page, live_server, sre)
        page.goto(f"{live_server.url}/price-sheets/")
        expect(
            page.get_by_role("heading", level=2, name="GPU models without a price")
        ).to_be_visible()
        assert no_sideways_scroll(page)

        page.get_by_role("textbox", name="GPU model", exact=True).fill("L4-24GB")
        page.get_by_role("textbox", name="Price per GPU-hour").fill("0.59")
        page.get_by_role("textbox", name="Currency").fill("usd")
        page.locator("#id_effective_from").fill(timezone.now().date().isoformat())
        page.get_by_role("button", name="Record the price").click()
        expect(page.locator("#id_currency_error")).to_contain_text("three capital letters")
        assert no_sideways_scroll(page)
        screenshot(page, f"price-sheets-error-js-{javascript}")

        page.get_by_role("textbox", name="Currency").fill("USD")
        page.get_by_role("button", name="Record the price").click()
        expect(page.get_by_role("status")).to_contain_text("L4-24GB costs 0.5900 USD")
        expect(page.locator("#gpu-L4-24GB")).to_contain_text("in force")
        assert no_sideways_scroll(page)
        screenshot(page, f"price-sheets-phone-js-{javascript}")
        assert PriceSheet.objects.get().recorded_by == sre
    finally:
        context.close()


def test_the_navigation_with_cost_fits_a_desktop_bar(live_server, page, auditor):
    """Price sheets sit under Cost in the top bar (one item for both keeps it on a line)."""
    page.set_viewport_size({"width": 1280, "height": 800})
    log_in(page, live_server, auditor)
    page.goto(f"{live_server.url}/price-sheets/")

    nav = page.get_by_role("navigation", name="Main")
    expect(nav.get_by_role("link", name="Cost")).to_have_attribute("aria-current", "page")
    tops = page.evaluate(
        "[...document.querySelectorAll('.mainnav li')].map(li => li.getBoundingClientRect().top)"
    )
    assert len(set(tops)) == 1, "the navigation wrapped onto a second line"
    assert no_sideways_scroll(page)
