"""Reopening a release as a new draft leaves its waivers behind; the confirmation says
which ones, by gate title and who granted them (issue 27 item 8d)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from releases.governance import services
from releases.models import Release, Waiver
from tests.factories import PASSWORD
from tests.releases.factories import UNDECLARED, file_release

pytestmark = pytest.mark.browser


def log_in(page, live_server, user):
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill(user.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Welcome")


def test_the_reopen_confirmation_lists_the_waivers_that_lapse(live_server, page, owner, sre, world):
    # Metrics left undeclared: the metrics_coverage gate fails, so it takes a waiver.
    release = file_release(world, owner, metrics_declared=UNDECLARED)
    until = timezone.now() + dt.timedelta(days=2)
    revoked = services.grant_waiver(
        release, actor=sre, gate="metrics_coverage", reason="flaky exporter", expires_at=until
    )
    services.revoke_waiver(revoked, actor=sre, why="the exporter is fixed")
    services.grant_waiver(
        release,
        actor=sre,
        gate="metrics_coverage",
        reason="re-measured on Monday",
        expires_at=until,
    )
    services.withdraw_release(release, actor=owner, reason="wrong candidate")

    log_in(page, live_server, owner)
    page.goto(f"{live_server.url}/releases/{release.pk}/")
    page.get_by_role("link", name="Reopen as draft…").click()

    panel = page.locator("#lapsing-waivers")
    expect(panel.get_by_role("heading")).to_have_text("Waivers do not carry over")
    expect(panel.get_by_role("listitem")).to_have_count(1)
    expect(panel.get_by_role("listitem")).to_contain_text(
        f"Metrics coverage declared by {sre.username} until"
    )
    expect(panel).to_contain_text("re-measured on Monday")
    expect(panel).not_to_contain_text("flaky exporter")

    page.get_by_role("button", name="Reopen as a new draft").click()

    draft = Release.objects.get(reopened_from=release)
    expect(page).to_have_url(f"{live_server.url}/releases/{draft.pk}/edit/")
    assert not Waiver.objects.filter(release=draft).exists()


def test_without_waivers_the_confirmation_says_none_stands(live_server, page, owner, release):
    services.withdraw_release(release, actor=owner)

    log_in(page, live_server, owner)
    page.goto(f"{live_server.url}/releases/{release.pk}/reopen/")

    expect(page.locator("#lapsing-waivers")).to_contain_text(
        "No waiver stands on this release; the new draft starts with none either."
    )
