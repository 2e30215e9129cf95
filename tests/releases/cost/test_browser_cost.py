"""The fleet cost page in a real browser, on a phone: with JavaScript the chart draws
(and the page keeps its Content-Security-Policy); without it the same numbers are in the
tables; the period picker works either way."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from tests.foundation.test_browser_csp import CSP_LISTENER
from tests.releases.cost.test_cost_days import breakdown, materialize, price, summary
from tests.releases.factories import build_world, report
from tests.releases.test_browser_release import log_in, no_sideways_scroll

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}


def test_the_fleet_cost_page_with_and_without_javascript(live_server, browser, team, auditor):
    yesterday = timezone.now().astimezone(dt.UTC).date() - dt.timedelta(days=1)
    price(since=yesterday - dt.timedelta(days=30))
    world = build_world(team)
    report(world.live, "short", output_tokens_per_s=1000)
    for offset in range(3):
        day = summary(
            world.service,
            yesterday - dt.timedelta(days=offset),
            requests=300,
            output_tokens=43_200_000,
        )
        breakdown(day, "support", "chat", requests=200, output_tokens=32_400_000)
        breakdown(day, "sales", "rag", requests=100, output_tokens=10_800_000)
    materialize()
    complaints: list[str] = []
    for javascript in (True, False):
        complaints.clear()
        context = browser.new_context(java_script_enabled=javascript, viewport=PHONE)
        try:
            page = context.new_page()
            page.on(
                "console",
                lambda m: "Content Security Policy" in m.text and complaints.append(m.text),
            )
            page.on("pageerror", lambda error: complaints.append(f"pageerror: {error}"))
            if javascript:
                page.add_init_script(CSP_LISTENER)
            log_in(page, live_server, auditor)
            page.goto(f"{live_server.url}/cost/")

            expect(page.get_by_role("heading", name="Fleet cost")).to_be_visible()
            by_tenant = page.get_by_role("table", name="Cost by tenant")
            expect(by_tenant.get_by_role("row", name="support")).to_contain_text("66.15")
            expect(page.locator(".facts")).to_contain_text("176.40 USD")  # 3 x 58.80
            chart = page.locator("#chart-cost .main-svg").first
            if javascript:
                expect(chart).to_be_visible()
            else:
                expect(chart).to_have_count(0)
            assert no_sideways_scroll(page), f"sideways scroll with javascript={javascript}"
            page.get_by_label("Period").select_option("7")
            page.get_by_role("button", name="Show").click()
            expect(page).to_have_url(f"{live_server.url}/cost/?days=7")
            expect(page.get_by_role("combobox", name="Period")).to_have_value("7")
            if javascript:
                assert page.evaluate("window.__csp") == []
            assert complaints == []
        finally:
            context.close()
