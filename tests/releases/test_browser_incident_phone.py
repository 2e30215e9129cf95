"""The incident screen's first screen on a 390 by 844 phone, in a real browser: with a
guard breached (the red box on top), the rollback target and its readiness are on it
beside what is live, and so are the jump links; the Who-to-call link scrolls there,
where an owner's phone is a number to tap; a playbook opens with one tap."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from ledger.models import Contact
from tests.releases.factories import observe, roll_out
from tests.releases.test_browser_incident import SLOW
from tests.releases.test_browser_release import log_in, no_sideways_scroll, screenshot

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}


def _bottom(locator) -> float:
    box = locator.bounding_box()
    assert box is not None, f"{locator} is not displayed"
    return box["y"] + box["height"]


def test_on_a_phone_the_first_screen_holds_target_readiness_and_the_jump_links(
    live_server, browser, world, release, owner, signers, sre
):
    rolling = roll_out(release, owner, signers)
    observe(rolling, sre, SLOW)
    observe(rolling, sre, SLOW)  # breached: the red box takes the top of the screen
    Contact.objects.create(user=owner, phone="+86 138-0000 0000")
    for javascript in (True, False):
        context = browser.new_context(java_script_enabled=javascript, viewport=PHONE)
        try:
            page = context.new_page()
            log_in(page, live_server, sre)
            page.goto(f"{live_server.url}/services/kb-assistant/incident/")
            expect(page.get_by_role("heading", name="Roll back first")).to_be_visible()

            jump = page.get_by_role("navigation", name="On this screen")
            for name in ("Rollback", "Playbook", "Who to call"):
                assert _bottom(jump.get_by_role("link", name=name, exact=True)) <= PHONE["height"]
            expect(page.locator("#live-facts")).to_contain_text(world.live.label)
            assert _bottom(page.locator("#live-facts")) <= PHONE["height"]
            expect(page.locator("#rollback-target")).to_contain_text("Target ")
            assert _bottom(page.locator("#rollback-target")) <= PHONE["height"]
            assert _bottom(page.locator("[data-readiness]")) <= PHONE["height"]
            assert no_sideways_scroll(page), f"sideways scroll with javascript={javascript}"
            screenshot(page, f"incident-first-screen-js-{javascript}")
        finally:
            context.close()


def test_the_who_to_call_link_scrolls_to_a_phone_to_tap(
    live_server, browser, world, release, owner, signers, sre
):
    Contact.objects.create(user=owner, phone="+86 138-0000 0000")
    context = browser.new_context(viewport=PHONE)
    page = context.new_page()
    log_in(page, live_server, sre)
    page.goto(f"{live_server.url}/services/kb-assistant/incident/")
    owners = page.get_by_role("heading", name="Who to call", exact=True)
    expect(owners).not_to_be_in_viewport()

    page.get_by_role("navigation", name="On this screen").get_by_role(
        "link", name="Who to call"
    ).click()

    expect(owners).to_be_in_viewport()
    row = page.locator("#owners tr", has_text=owner.username).or_(
        page.locator("#owners tr", has_text=owner.get_full_name() or owner.username)
    )
    tel = row.first.get_by_role("link", name="+86 138-0000 0000")
    expect(tel).to_have_attribute("href", "tel:+8613800000000")
    expect(row.first).to_contain_text("Model owner")  # the role's name, not its key
    context.close()


def test_a_playbook_opens_with_one_tap(live_server, browser, world, sre):
    context = browser.new_context(viewport=PHONE)
    page = context.new_page()
    log_in(page, live_server, sre)
    page.goto(f"{live_server.url}/services/kb-assistant/incident/")
    playbook = page.locator("#playbook-slow_first_token")
    expect(playbook.get_by_role("heading", name="Diagnose, in this order")).to_be_hidden()

    playbook.get_by_text("Slow first token", exact=True).click()

    expect(playbook.get_by_role("heading", name="Diagnose, in this order")).to_be_visible()
    expect(playbook.locator("ol").first).to_contain_text("Gateway queue")
    context.close()


def test_on_a_phone_the_gateway_block_is_one_tap_away_with_or_without_javascript(
    live_server, browser, world, release, owner, signers, sre
):
    roll_out(release, owner, signers)
    for javascript in (True, False):
        context = browser.new_context(java_script_enabled=javascript, viewport=PHONE)
        try:
            page = context.new_page()
            log_in(page, live_server, sre)
            page.goto(f"{live_server.url}/services/kb-assistant/incident/")
            jump = page.get_by_role("navigation", name="On this screen")
            link = jump.get_by_role("link", name="Gateway", exact=True)
            assert _bottom(link) <= PHONE["height"]
            block = page.locator("#gateway")

            link.click()

            heading = page.get_by_role("heading", name="What the gateway should be doing")
            expect(heading).to_be_in_viewport()
            expect(block).to_contain_text("95.0 % kb-assistant-live")
            expect(block).to_contain_text("5.0 % kb-assistant-canary candidate")
            expect(block).to_contain_text("input ≤ 8192 · output ≤ 1024 tokens")
            expect(block.get_by_role("link", name="v1")).to_have_attribute(
                "href", "/services/kb-assistant/gateway-policy/1/"
            )
            assert no_sideways_scroll(page), f"sideways scroll with javascript={javascript}"
            screenshot(page, f"incident-gateway-block-js-{javascript}")
        finally:
            context.close()
