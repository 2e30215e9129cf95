"""License review and the Events page in a real browser: desktop, a 390 px phone, and
a context with JavaScript turned off."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from ledger import services
from ledger.models import Event, ModelAsset
from tests.factories import PASSWORD
from tests.ledger.factories import RevisionFactory

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1366, "height": 900}


def log_in(page, live_server, user):
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill(user.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Welcome")


@pytest.fixture
def live(team):
    """kb-assistant serving r1; its asset's license awaits review."""
    revision = RevisionFactory(service__team=team, service__slug="kb-assistant")
    services.set_live_revision(revision.service, revision, actor=None)
    return revision


@pytest.fixture
def no_script_page(browser):
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    yield page
    context.close()


def _reject_through_the_pages(page, live_server, asset: ModelAsset) -> None:
    page.goto(f"{live_server.url}/assets/{asset.pk}/")
    expect(page.get_by_text("license pending").first).to_be_visible()
    page.get_by_role("link", name="Reject license…").click()
    expect(page.get_by_role("heading", name=f"Review the license of {asset}")).to_be_visible()
    expect(page.get_by_label("Reject the license")).to_be_checked()
    # Without a reason the rejection is refused beside the comment.
    page.get_by_role("button", name="Record the review").click()
    expect(page.locator("#id_comment_error")).to_contain_text("Say why the license is rejected")
    page.get_by_label("Comment").fill("Terms forbid hosting for customers.")
    page.get_by_role("button", name="Record the review").click()
    expect(page).to_have_url(f"{live_server.url}/assets/{asset.pk}/")
    expect(page.get_by_text(f"Rejected the license of {asset}.")).to_be_visible()


def test_security_rejects_a_license_and_the_events_and_service_pages_say_so(
    live_server, page, security, live
):
    page.set_viewport_size(DESKTOP)
    log_in(page, live_server, security)

    _reject_through_the_pages(page, live_server, live.model_asset)

    expect(page.locator(".license-review")).to_contain_text("Terms forbid hosting for customers.")
    page.goto(f"{live_server.url}/events/?service=kb-assistant")
    row = page.locator("tbody tr").filter(has_text="model_asset.license_reviewed")
    expect(row).to_contain_text("rejected")
    expect(row).to_contain_text("Terms forbid hosting for customers.")
    expect(row).to_contain_text("Model asset")
    page.goto(f"{live_server.url}/services/kb-assistant/")
    expect(page.locator("#license-warning")).to_contain_text("rejected the license")


def test_security_reviews_a_license_without_javascript(live_server, no_script_page, security, live):
    page = no_script_page
    page.set_viewport_size(PHONE)
    log_in(page, live_server, security)

    _reject_through_the_pages(page, live_server, live.model_asset)

    live.model_asset.refresh_from_db()
    assert live.model_asset.license_approval == "rejected"


def test_owner_records_accepting_gated_terms_in_the_browser(live_server, page, owner, team):
    from tests.ledger.factories import LicenseFactory

    gated = LicenseFactory(
        spdx_id="LicenseRef-Gemma", name="Gemma Terms of Use", kind="acceptable_use", gated=True
    )
    revision = RevisionFactory(
        service__team=team, service__slug="kb-assistant", model_asset__license=gated
    )
    asset = revision.model_asset
    page.set_viewport_size(DESKTOP)
    log_in(page, live_server, owner)
    page.goto(f"{live_server.url}/services/kb-assistant/r1/")
    expect(page.locator("#license-warning")).to_contain_text("nobody has recorded accepting")

    page.goto(f"{live_server.url}/assets/{asset.pk}/")
    page.get_by_role("link", name="Record an acceptance…").click()
    page.get_by_label("Terms version").fill("2024-02-21")
    expect(page.get_by_label("Accepted by")).to_have_value(owner.get_full_name())
    page.get_by_role("button", name="Record the acceptance").click()

    expect(
        page.get_by_text(f"Recorded: {owner.get_full_name()} accepted LicenseRef-Gemma terms")
    ).to_be_visible()
    expect(page.locator("table").filter(has_text="Accepted by")).to_contain_text("2024-02-21")
    page.goto(f"{live_server.url}/services/kb-assistant/r1/")
    expect(page.locator("#license-warning")).not_to_contain_text("nobody has recorded accepting")


# ---------------------------------------------------------------- the Events page


@pytest.fixture
def many_events(owner, team):
    # Long subject labels, as real assets have, squeeze the other columns.
    revision = RevisionFactory(
        service__team=team,
        service__slug="kb-assistant",
        model_asset__name="Qwen2.5-Coder-32B-Instruct-GPTQ-Int4-merged-with-kb-adapter-v3",
        model_asset__revision="0123456789abcdef0123456789abcdef01234567",
    )
    for n in range(12):
        services.update_asset(revision.model_asset, actor=owner, family=f"family-{n}")
    return revision


def test_events_on_a_desktop_keep_the_filters_open_in_even_columns_and_hashes_on_one_line(
    live_server, page, auditor, many_events
):
    page.set_viewport_size(DESKTOP)
    log_in(page, live_server, auditor)
    page.goto(f"{live_server.url}/events/")

    expect(page.get_by_label("Actor")).to_be_visible()
    expect(page.locator("#event-filters > summary")).to_be_hidden()
    start = page.get_by_label("From", exact=True).bounding_box()
    end = page.get_by_label("To", exact=True).bounding_box()
    assert start and end
    # "To" is a field like the others, not a bar across the row.
    assert end["width"] <= start["width"] + 1, (start, end)
    hashes = page.locator("td[data-label='Hash'] code")
    expect(hashes.first).to_be_visible()
    lines = hashes.evaluate_all("codes => codes.map(code => code.getClientRects().length)")
    assert lines and set(lines) == {1}, lines
    heights = hashes.evaluate_all("codes => codes.map(code => code.getBoundingClientRect().height)")
    line = page.evaluate(
        "parseFloat(getComputedStyle(document.querySelector(\"td[data-label='Hash'] code\")).lineHeight)"
        " || 20"
    )
    assert max(heights) < 1.5 * line, (heights, line)


def test_events_on_a_phone_fold_the_filters_so_the_first_screen_shows_events(
    live_server, page, auditor, many_events
):
    page.set_viewport_size(PHONE)
    log_in(page, live_server, auditor)
    page.goto(f"{live_server.url}/events/")

    summary = page.locator("#event-filters > summary")
    expect(summary).to_be_visible()
    expect(page.get_by_label("Actor")).to_be_hidden()
    first_event = page.locator("tbody tr").first
    expect(first_event).to_be_visible()
    box = first_event.bounding_box()
    assert box and box["y"] < PHONE["height"], box
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")

    summary.click()
    page.get_by_label("Actor").fill("system")
    page.get_by_label("Actor").press("Enter")
    expect(page).to_have_url(re.compile(r"actor=system"))
    expect(page.locator(".result-count")).to_contain_text("match")


def test_without_javascript_the_events_page_never_says_it_is_recomputing(
    live_server, no_script_page, auditor, many_events
):
    page = no_script_page
    page.set_viewport_size(DESKTOP)
    log_in(page, live_server, auditor)
    page.goto(f"{live_server.url}/events/")

    expect(page.locator("tbody tr").first).to_be_visible()
    indicator = page.locator("#verify-indicator")
    expect(indicator).to_be_hidden()
    # Not even a blank space kept for it: it is not laid out at all.
    assert indicator.evaluate("el => el.getClientRects().length") == 0
    assert "Recomputing" not in page.locator("main").inner_text()
    # The filters work as a plain form, and the chain check as its own page.
    page.get_by_label("Actor").fill(many_events.service.team.members.first().username)
    page.get_by_role("button", name="Apply").click()
    expect(page).to_have_url(re.compile(r"actor=olivia"))
    page.get_by_role("link", name="Verify chain").click()
    expect(page).to_have_url(f"{live_server.url}/events/verify")
    expect(page.get_by_text("intact")).to_be_visible()


def test_with_javascript_the_recomputing_line_shows_while_the_chain_is_checked(
    live_server, page, auditor, many_events
):
    page.set_viewport_size(DESKTOP)
    log_in(page, live_server, auditor)
    page.goto(f"{live_server.url}/events/")
    indicator = page.get_by_text("Recomputing every hash…")
    expect(indicator).to_be_hidden()
    held = []
    page.route("**/events/verify", lambda route: held.append(route))

    page.get_by_role("link", name="Verify chain").click()

    # The check's request is held: while it is out, the line says what is going on.
    expect(indicator).to_be_visible()
    page.wait_for_function("() => true")  # let the route callback run
    assert held, "the chain check was requested"
    held[0].continue_()
    expect(page.locator("#chain-status")).to_contain_text(f"All {Event.objects.count()} events")
    expect(indicator).to_be_hidden()
    expect(page).to_have_url(f"{live_server.url}/events/")
