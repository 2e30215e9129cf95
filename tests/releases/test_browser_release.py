"""A release through a real browser: the model owner files it, watches a gate turn
green after attaching a load-test report, submits, and each other role signs in
its own browser context until the release is approved. Also: the release page
on a phone, and the form saved with JavaScript off.

Set RELEASE_SCREENSHOTS to a folder to keep screenshots of the pages.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from pathlib import Path

import pytest
from django.urls import reverse
from django.utils import timezone
from playwright.sync_api import expect

from ledger.models import LoadTestReport
from releases.governance import services
from releases.models import Release
from tests.factories import PASSWORD
from tests.foundation.test_browser_csp import CSP_LISTENER
from tests.ledger.evidence.conftest import fixture_path
from tests.releases.factories import build_world, file_release

pytestmark = pytest.mark.browser

METRICS = [
    "Time to first token",
    "Time per output token",
    "Tokens per second",
    "Queue length",
    "GPU memory",
    "KV-cache usage",
    "Error rate",
]


def log_in(page, live_server, user):
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill(user.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Welcome")


def screenshot(page, name: str) -> None:
    folder = os.environ.get("RELEASE_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


def no_sideways_scroll(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth") <= page.viewport_size["width"]


def gate(page, key):
    return page.locator(f"#gate-{key}")


def test_owner_files_watches_a_gate_turn_green_submits_and_each_role_signs(
    live_server, browser, page, owner, team, signers
):
    world = build_world(team, sample_candidate=True)
    # The candidate lacks its high-concurrency evidence: the owner attaches it below.
    world.reports.pop("high_concurrency").delete()
    page.add_init_script(CSP_LISTENER)  # the form's htmx swaps stay within the policy
    log_in(page, live_server, owner)
    page.goto(f"{live_server.url}/services/{world.service.slug}/")
    page.get_by_role("link", name="File a release").first.click()
    expect(page.get_by_role("heading", level=1)).to_have_text(
        f"New release of {world.service.slug}"
    )
    expect(page.locator("#from-revision")).to_contain_text(world.live.label)

    page.get_by_label("To revision").select_option(str(world.candidate.pk))
    page.get_by_label("Change kind").select_option("model_upgrade")
    expect(page.locator("#risk-suggested")).to_contain_text("Pick a change kind")
    page.get_by_label("Summary").fill("Move kb-assistant to the new fine-tune")
    page.get_by_label("Tenants").fill("support")
    page.get_by_label("Agent runtime").check()
    page.get_by_label(f"{world.sample_set.name} (v1), replayed on this service").check()
    for metric in METRICS:
        page.get_by_label(metric, exact=True).check()
    for row, (traffic, minutes) in enumerate([("5", "60"), ("25", "120"), ("100", "60")]):
        page.get_by_label(f"Stage {row + 1}: Traffic (%)").fill(traffic)
        page.get_by_label(f"Stage {row + 1}: Observe (min)").fill(minutes)
        if traffic != "100":
            page.get_by_label(f"Stage {row + 1}: p95 TTFT (ms)").fill("900")
            page.get_by_label(f"Stage {row + 1}: Error rate (%)").fill("1")
            page.get_by_label(f"Stage {row + 1}: Structured-output error rate (%)").fill("2")
    page.get_by_label("Rollback kind").select_option("model")
    page.get_by_label("Trigger conditions").fill("p95 TTFT above 1200 ms for 10 min")
    page.get_by_label("Expected minutes").fill("10")
    page.get_by_label("Impact scope").fill("every tenant for about ten minutes")
    page.get_by_label("Verification sample set").fill(world.verification_set.name)
    page.get_by_label("Debug logs").select_option("off")
    page.get_by_label("Audit logs").select_option("on")
    page.get_by_label("Sensitive content kept (days)").fill("30")
    page.get_by_label("Retirement plan").fill("Retire with the next fine-tune; 30 days' notice.")
    page.get_by_role("button", name="Save draft").click()

    release = Release.objects.get()
    expect(page).to_have_url(f"{live_server.url}/releases/{release.pk}/edit/")
    expect(page.locator("#risk-suggested")).to_contain_text("high")
    # The diff (another model, on another engine) suggests systems downstream: each is
    # ticked here, and the impact gate turns green.
    expect(gate(page, "impact_assessed")).to_have_attribute("data-status", "fail")
    suggested = page.locator("#impact-suggested li strong").all_inner_texts()
    assert {"Eval", "Trace"} <= set(suggested)
    expect(gate(page, "impact_assessed")).to_contain_text("Eval")
    for label in suggested:
        page.get_by_label(label, exact=True).check()
        expect(page.locator("#save-status")).to_contain_text("Draft saved")
    expect(gate(page, "impact_assessed")).to_have_attribute("data-status", "pass")
    expect(gate(page, "load_evidence")).to_have_attribute("data-status", "fail")
    expect(gate(page, "load_evidence")).to_contain_text(
        "no current load-test report for high_concurrency"
    )
    expect(gate(page, "replay")).to_have_attribute("data-status", "pass")
    screenshot(page, "form-gate-failing")

    # A change of the form saves the draft and recomputes the gates beside it.
    page.get_by_label("Rollback kind").select_option("")
    expect(page.locator("#save-status")).to_contain_text("Draft saved")
    expect(gate(page, "rollback_plan")).to_have_attribute("data-status", "fail")
    expect(gate(page, "rollback_plan")).to_contain_text(
        "the kind (engine, model or gateway policy)"
    )
    page.get_by_label("Rollback kind").select_option("model")
    expect(gate(page, "rollback_plan")).to_have_attribute("data-status", "pass")

    # Attach the missing report on the candidate's page, in another tab.
    evidence = page.context.new_page()
    evidence.goto(f"{live_server.url}/services/{world.service.slug}/{world.candidate.label}/")
    evidence.get_by_label("Workload class").select_option("high_concurrency")
    evidence.get_by_label("Report file").set_input_files(
        fixture_path("vllm", "vllm_c2_n20_detailed.json")
    )
    evidence.get_by_role("button", name="Save report").click()
    expect(evidence.locator("#evidence [role=status]")).to_contain_text("Saved")
    assert LoadTestReport.objects.filter(workload="high_concurrency").exists()
    evidence.close()

    page.get_by_role("link", name="Recheck").click()
    expect(gate(page, "load_evidence")).to_have_attribute("data-status", "pass")
    expect(
        gate(page, "load_evidence").get_by_role("link", name=re.compile(r"report #\d+"))
    ).to_have_count(4)
    screenshot(page, "form-gate-passing")
    assert page.evaluate("window.__csp") == []

    page.get_by_role("link", name="Submit…").first.click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Submit for sign-off")
    page.get_by_role("button", name="Submit for sign-off").click()
    expect(page.locator(".messages")).to_contain_text(f"Submitted release #{release.pk}")
    release.refresh_from_db()
    assert release.state == "submitted"

    for role, signer in signers.items():
        context = browser.new_context()
        try:
            signer_page = context.new_page()
            log_in(signer_page, live_server, signer)
            signer_page.get_by_role("link", name="Waiting for me").first.click()
            signer_page.get_by_role("link", name=f"Release #{release.pk} of").click()
            form = signer_page.locator("#signoff-form")
            expect(form.get_by_label("Role")).to_have_value(role)
            form.get_by_label("Approve").check()
            form.get_by_label("Comment").fill(f"checked as {role}")
            form.get_by_role("button", name="Sign").click()
            expect(signer_page.locator(".messages")).to_contain_text("Approved for ")
        finally:
            context.close()

    release.refresh_from_db()
    assert release.state == "approved"
    page.goto(f"{live_server.url}/releases/{release.pk}/")
    expect(page.locator("h1 .badge").first).to_have_text("approved")
    expect(gate(page, "signoffs")).to_have_attribute("data-status", "pass")
    expect(page.locator("#signoffs tbody tr")).to_have_count(4)
    assert page.evaluate("window.__csp") == []


def test_release_page_fits_a_phone(live_server, page, owner, world, sre):
    release = file_release(world, owner)
    page.set_viewport_size({"width": 390, "height": 844})
    log_in(page, live_server, sre)
    page.goto(f"{live_server.url}{reverse('releases:release_detail', args=[release.pk])}")
    expect(page.locator("#gate-panel")).to_be_visible()
    screenshot(page, "release-phone")
    assert no_sideways_scroll(page)
    page.goto(f"{live_server.url}{reverse('releases:release_list')}")
    assert no_sideways_scroll(page)


def test_on_a_phone_a_waiver_says_how_long_it_has_left_and_who_may_waive(
    live_server, page, owner, world, security
):
    release = file_release(world, owner, logging_policy={})
    services.grant_waiver(
        release,
        actor=security,
        gate="logging_policy",
        reason="logging reviewed offline with the data protection officer",
        expires_at=timezone.now() + dt.timedelta(days=3, hours=1),
    )
    page.set_viewport_size({"width": 375, "height": 812})
    log_in(page, live_server, security)
    page.goto(f"{live_server.url}{reverse('releases:release_detail', args=[release.pk])}")
    expect(page.locator("#waivers")).to_contain_text("3 days left")
    expect(gate(page, "logging_policy")).to_contain_text("3 days left")
    expect(gate(page, "license")).to_contain_text("Waived only by security & compliance.")
    expect(gate(page, "rollback_plan")).to_contain_text("Waived only by platform.")
    screenshot(page, "release-waiver-phone")
    assert no_sideways_scroll(page)


def test_the_form_saves_with_javascript_off(live_server, browser, owner, world):
    release = file_release(world, owner)
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        log_in(page, live_server, owner)
        page.goto(f"{live_server.url}/releases/{release.pk}/edit/")
        page.get_by_label("Summary").fill("Saved by a browser without JavaScript")
        page.get_by_role("button", name="Save draft").click()
        expect(page.locator(".messages")).to_contain_text(f"Saved release #{release.pk}.")
        expect(page).to_have_url(f"{live_server.url}/releases/{release.pk}/edit/")
    finally:
        context.close()
    release.refresh_from_db()
    assert release.summary == "Saved by a browser without JavaScript"
