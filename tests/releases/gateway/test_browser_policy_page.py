"""The gateway policy in a real browser, on a phone: on its page, change a limit, preview
what it does to callers and the config, record the version, read it on its page; and the
same from a release form, where the recorded version becomes the candidate's."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from ledger.models import GatewayPolicy
from releases.models import Release
from tests.releases.factories import file_release
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


def test_an_owner_changes_the_candidates_policy_from_the_release_form(
    live_server, browser, world, owner
):
    release = file_release(world, owner, change_kind=Release.ChangeKind.ROUTING)
    context = browser.new_context(viewport=PHONE)
    try:
        page = context.new_page()
        log_in(page, live_server, owner)
        page.goto(f"{live_server.url}/releases/{release.pk}/edit/")
        editor = page.locator("#release-policy")  # loaded into the form's page by htmx
        expect(editor).to_contain_text(f"The candidate {world.candidate.label} runs v1")

        editor.get_by_label("Max output tokens").fill("512")
        editor.get_by_role("button", name="Preview").click()

        expect(page.locator("#release-policy-preview")).to_contain_text(
            "max_output_tokens 1024 → 512: long answers for tenants support, sales will be "
            "truncated"
        )
        assert GatewayPolicy.objects.filter(service=world.service).count() == 1
        assert no_sideways_scroll(page)
        screenshot(page, "release-form-gateway-policy")

        page.locator("#release-policy").get_by_role("button", name="Record and use it").click()

        expect(page.locator("body")).to_contain_text("Recorded gateway policy v2")
        release.refresh_from_db()
        candidate = release.to_revision
        assert candidate.gateway_policy.version == 2
        expect(page.get_by_label("To revision")).to_have_value(str(candidate.pk))
        expect(page.locator("#release-policy")).to_contain_text(
            f"The candidate {candidate.label} runs v2"
        )
    finally:
        context.close()


def test_another_change_kind_loads_the_editor_only_when_opened(live_server, browser, world, owner):
    release = file_release(world, owner)  # a model upgrade
    context = browser.new_context(viewport=PHONE)
    try:
        page = context.new_page()
        log_in(page, live_server, owner)
        page.goto(f"{live_server.url}/releases/{release.pk}/edit/")
        expect(page.locator("#release-policy-slot a")).to_have_text(
            "See or change the policy the candidate runs"
        )  # inside the closed box, unloaded
        expect(page.locator("#release-policy")).to_have_count(0)

        page.get_by_text("Gateway policy of the candidate (in force: v1)").click()

        expect(page.locator("#release-policy")).to_contain_text(
            f"The candidate {world.candidate.label} runs v1"
        )
    finally:
        context.close()
