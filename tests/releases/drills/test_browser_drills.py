"""A drill planned in a real browser on a phone: the form's refusal shows beside the field
it names, the corrected plan is recorded, and its page reads without sideways scrolling."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from releases.models import Drill
from tests.releases.factories import build_world
from tests.releases.test_browser_release import log_in, no_sideways_scroll
from tests.replay.factories import SampleFactory, SampleSetFactory

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}


def test_planning_a_drill_on_a_phone(live_server, browser, team, sre):
    build_world(team, task_types=("chat", "sql"))
    SampleFactory(sample_set=SampleSetFactory(name="peak-chat"))
    SampleFactory(sample_set=SampleSetFactory(name="writes-tickets"), rerunnable=False)
    context = browser.new_context(viewport=PHONE)
    try:
        page = context.new_page()
        log_in(page, live_server, sre)
        page.goto(f"{live_server.url}/releases/")
        page.get_by_role("link", name="Peak drills").click()
        expect(page.get_by_text("No drill has been planned yet")).to_be_visible()
        page.get_by_role("link", name="Plan a drill").click()

        page.get_by_label("Name", exact=True).fill("Support campaign")
        page.get_by_label("Services").select_option("kb-assistant")
        row = page.get_by_role("group", name="Task type 1")
        row.get_by_label("Task type").select_option("chat")
        row.get_by_label("Sample set").fill("writes-tickets")
        row.get_by_label("Weight").fill("1")
        row.get_by_label("p95 TTFT (ms)").fill("800")
        row.get_by_label("p95 end to end (ms)").fill("4000")
        page.get_by_label("Arrivals").select_option("constant")
        page.get_by_label("Rate (requests/s)").fill("5")
        page.get_by_label("Duration (s)").fill("60")
        page.get_by_role("button", name="Plan the drill").click()

        expect(page.get_by_role("alert")).to_contain_text("Nothing was saved")
        field = page.locator("#field-task_1_sample_set")
        expect(field).to_contain_text("has no re-runnable sample")
        assert not Drill.objects.exists()

        field.get_by_label("Sample set").fill("peak-chat")
        page.get_by_role("button", name="Plan the drill").click()

        expect(page.get_by_role("heading", name="Support campaign")).to_be_visible()
        expect(page.get_by_text("Drill #")).to_be_visible()
        expect(page.locator("table").first).to_contain_text("chat")
        assert no_sideways_scroll(page)
        page.screenshot(path="/tmp/drill-phone.png", full_page=True)
        assert Drill.objects.get().arrival == {"type": "constant", "rate": 5.0, "duration_s": 60}
    finally:
        context.close()
