"""In a real browser (issue 27, item 6): the Promote page of a stage still in its
observation window offers no doomed button, says when it can be promoted, and lets
platform end the window with a reason; the Start page warns of an early start and asks
why; a filer finds their rejected release on the home page. On a phone too."""

from __future__ import annotations

import datetime as dt

import pytest
from django.urls import reverse
from django.utils import timezone
from playwright.sync_api import expect

from ledger.models import Event
from releases.governance import services
from releases.models import Release, Stage
from tests.releases.factories import approve, observe, roll_out
from tests.releases.test_browser_release import log_in, no_sideways_scroll

pytestmark = pytest.mark.browser

GOOD = {
    "requests": 1200,
    "ttft_p95_ms": 640,
    "error_rate_pct": 0.2,
    "structured_error_rate_pct": 0.5,
}


def test_promote_within_the_window_offers_hold_and_ending_the_window(
    live_server, page, release, owner, signers, sre
):
    rolling = roll_out(release, owner, signers)
    observe(rolling, sre, GOOD)
    page.set_viewport_size({"width": 390, "height": 844})
    log_in(page, live_server, sre)
    page.goto(live_server.url + reverse("releases:release_detail", args=[rolling.pk]))
    page.get_by_role("link", name="Promote…").first.click()

    notice = page.locator("#refused-ahead")
    expect(notice).to_contain_text("The observation window of stage 1 ends at")
    expect(page.get_by_role("button", name="Promote")).to_have_count(0)
    expect(notice.get_by_role("link", name="Hold…")).to_be_visible()
    assert no_sideways_scroll(page)

    notice.get_by_role("link", name="End the window now…").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("End the observation window now")
    page.get_by_role("button", name="End the observation window now").click()
    expect(page.locator("#error-summary")).to_be_visible()  # the reason is required
    page.get_by_label("Reason").fill("tenant support checked the canary at 14:05")
    page.get_by_role("button", name="End the observation window now").click()

    expect(page.get_by_text("Ended the observation window of stage 1 early")).to_be_visible()
    expect(page.locator('[data-stage-state="observing"]')).to_be_visible()
    assert Stage.objects.get(release=rolling, number=2).state == "observing"
    assert Event.objects.filter(action="release.stage_window_ended").count() == 1


def test_an_early_start_is_warned_of_and_needs_a_reason(live_server, page, release, owner, signers):
    Release.objects.filter(pk=release.pk).update(
        planned_start=timezone.now() + dt.timedelta(days=2)
    )
    release.refresh_from_db()
    approved = approve(release, owner, signers)
    log_in(page, live_server, owner)
    page.goto(live_server.url + reverse("releases:rollout_action", args=[approved.pk, "start"]))

    expect(page.locator("#early-start")).to_contain_text("2 days from now")
    page.get_by_role("button", name="Start the rollout").click()
    expect(page.locator("#error-summary")).to_be_visible()
    page.get_by_label("Why start before the planned start").fill("the tenant asked for Friday")
    page.get_by_role("button", name="Start the rollout").click()
    expect(page.get_by_text(f"Release #{approved.pk} is rolling out")).to_be_visible()


def test_the_filer_finds_a_rejection_on_the_home_page(live_server, page, release, owner, business):
    services.submit_release(release, actor=owner)
    services.sign_off(
        release, actor=business, role="business_owner", decision="reject", comment="too early"
    )
    log_in(page, live_server, owner)
    item = page.locator(".attention li", has_text="was rejected by ben")
    expect(item).to_contain_text("“too early”")
    item.get_by_role("link").click()
    expect(page).to_have_url(
        live_server.url + reverse("releases:release_detail", args=[release.pk]) + "#signoffs"
    )
