"""The SRE's half through a real browser: three letters in the home page's search land on
the incident screen, a symptom picked shows its playbook, a rollback is recorded and
the new live revision shows; the screen on a 390 px phone, with JavaScript off, and a
rollout driven stage by stage from the release page.

Set RELEASE_SCREENSHOTS to a folder to keep screenshots of the pages.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from ledger.models import Service
from releases.models import RollbackEvent
from tests.foundation.test_browser_csp import CSP_LISTENER
from tests.releases.factories import observe, roll_out
from tests.releases.test_browser_release import log_in, no_sideways_scroll, screenshot
from tests.releases.test_rollbacks import release_fully

pytestmark = pytest.mark.browser

GOOD = {"requests": 1200, "ttft_p95_ms": 640, "error_rate_pct": 0.2, "json_valid_pct": 99.5}
SLOW = {**GOOD, "ttft_p95_ms": 1400}

SECTIONS = [
    "What is live",
    "Rollout",
    "Rollback",
    "What to check first",
    "Changes in the last 72 hours",
    "Who to call",
]


def test_an_sre_searches_three_letters_picks_a_symptom_and_rolls_back(
    live_server, page, world, release, owner, signers, sre
):
    release_fully(roll_out(release, owner, signers), sre)
    page.add_init_script(CSP_LISTENER)
    log_in(page, live_server, sre)

    page.get_by_role("searchbox", name="Find a service or model").first.fill("kb-")
    page.keyboard.press("Enter")
    expect(page).to_have_url(f"{live_server.url}/services/kb-assistant/incident/")
    expect(page.locator("#live-heading + dl")).to_contain_text(world.candidate.label)

    page.get_by_label("The symptom you see").select_option("slow_first_token")
    page.get_by_role("button", name="Show the playbook").click()
    expect(page.get_by_role("heading", name="Slow first token")).to_be_visible()
    expect(page.locator(".playbook ol").first).to_contain_text("Gateway queue")

    page.get_by_role("link", name="Record rollback").first.click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Roll back kb-assistant")
    expect(
        page.get_by_role(
            "heading", name=f"What changes going back: {world.candidate.label} → {world.live.label}"
        )
    ).to_be_visible()
    page.get_by_label("Symptom").select_option("slow_first_token")
    page.get_by_label("Reason").fill("p95 TTFT 2.1 s for tenant support since 14:05")
    page.get_by_role("button", name="Record rollback").click()

    rollback = RollbackEvent.objects.get()
    expect(page).to_have_url(f"{live_server.url}/services/kb-assistant/rollbacks/{rollback.pk}/")
    expect(page.locator(".messages")).to_contain_text(f"{world.live.label} is live on kb-assistant")
    page.goto(f"{live_server.url}/services/kb-assistant/incident/")
    expect(page.locator("#live-heading + dl")).to_contain_text(world.live.label)
    expect(page.locator("#live-heading + dl")).to_contain_text(f"through rollback #{rollback.pk}")
    screenshot(page, "incident-after-rollback")
    assert Service.objects.get(pk=world.service.pk).live_revision == world.live
    assert page.evaluate("window.__csp") == []


def test_the_incident_screen_fits_a_phone_and_reads_without_javascript(
    live_server, browser, world, release, owner, signers, sre
):
    rolling = roll_out(release, owner, signers)
    observe(rolling, sre, SLOW)
    observe(rolling, sre, SLOW)
    for javascript in (True, False):
        context = browser.new_context(
            java_script_enabled=javascript, viewport={"width": 390, "height": 844}
        )
        try:
            page = context.new_page()
            log_in(page, live_server, sre)
            page.goto(f"{live_server.url}/services/kb-assistant/incident/")
            expect(page.get_by_role("heading", name="Roll back first")).to_be_visible()
            for section in SECTIONS:
                expect(
                    page.get_by_role("heading", level=2, name=section, exact=True)
                ).to_be_visible()
            expect(page.locator("[data-stage-state]").first).to_have_attribute(
                "data-stage-state", "breached"
            )
            assert no_sideways_scroll(page), f"sideways scroll with javascript={javascript}"
            screenshot(page, f"incident-phone-js-{javascript}")
        finally:
            context.close()


def test_a_rollout_is_driven_from_the_release_page(
    live_server, page, world, release, owner, signers, sre
):
    from releases.models import Release

    rolling = roll_out(release, owner, signers)
    Release.objects.filter(pk=rolling.pk).update(path="emergency", emergency_reason="OOM")
    log_in(page, live_server, sre)
    page.goto(f"{live_server.url}/releases/{rolling.pk}/")
    expect(page.locator("#rollout")).to_contain_text("stage 1 of 3 sends 5 %")

    page.locator("#post-observation summary").click()
    page.get_by_label("Candidate: requests").fill("1200")
    page.get_by_label("Candidate: p95 TTFT (ms)").fill("610")
    page.get_by_label("Candidate: error rate (%)").fill("0.1")
    page.get_by_label("Candidate: structured-output error rate (%)").fill("0.2")
    page.get_by_role("button", name="Record the observation").click()
    expect(page.locator(".messages")).to_contain_text("Observation recorded: pass.")

    page.get_by_role("link", name="Promote…").click()
    page.get_by_role("button", name="Promote").click()
    expect(page.locator("#rollout")).to_contain_text("stage 2 of 3 sends 25 %")
