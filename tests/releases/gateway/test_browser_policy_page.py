"""The gateway policy page in a real browser, on a phone: change a limit, preview what it
does to callers and the config, record the version, read it on its page."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from ledger.models import GatewayPolicy
from tests.releases.test_browser_release import log_in, no_sideways_scroll, screenshot

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}


def test_an_owner_previews_and_records_a_version(live_server, browser, world, owner):
    context = browser.new_context(viewport=PHONE)
    try:
        page = context.new_page()
        log_in(page, live_server, owner)
        page.goto(f"{live_server.url}/services/kb-assistant/gateway-policy/")
        expect(page.get_by_role("heading", name="In force: v1")).to_be_visible()

        page.get_by_label("Max output tokens").fill("512")
        page.get_by_label("Why this version").fill("shorter answers for the sales peak")
        page.get_by_role("button", name="Preview").click()

        preview = page.locator("#preview")
        expect(preview).to_contain_text(
            "max_output_tokens 1024 → 512: long answers for tenants support, sales will be "
            "truncated"
        )
        expect(preview.locator("pre")).to_contain_text("max_output_tokens: 512")
        assert GatewayPolicy.objects.filter(service=world.service).count() == 1
        assert no_sideways_scroll(page)
        screenshot(page, "gateway-policy-preview")

        page.get_by_role("button", name="Record version").click()

        expect(page.get_by_role("heading", name="kb-assistant gateway policy v2")).to_be_visible()
        expect(page.locator("body")).to_contain_text("shorter answers for the sales peak")
        assert (
            GatewayPolicy.objects.get(service=world.service, version=2).document["limits"][
                "max_output_tokens"
            ]
            == 512
        )
    finally:
        context.close()
