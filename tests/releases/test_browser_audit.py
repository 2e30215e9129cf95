"""The auditor through a real browser: filters a period on the Audit page, requests an
evidence bundle, watches it wait and then build in a real Celery worker process, downloads
it, and the downloaded file verifies with scripts/verify_bundle.py. Also: the change
record prints without the site's chrome.

Set RELEASE_SCREENSHOTS to a folder to keep screenshots of the pages.
"""

from __future__ import annotations

import datetime as dt
import re
import subprocess
import sys
import uuid

import pytest
from django.db import connection
from django.utils import timezone
from playwright.sync_api import expect

from config.celery import app
from ledger import signing
from ledger.models import Event
from releases.governance import services
from releases.models import Export
from tests.factories import PASSWORD
from tests.foundation.test_browser_csp import CSP_LISTENER
from tests.releases.factories import build_world, file_release
from tests.releases.test_browser_release import screenshot
from tests.releases.test_exports import VERIFIER
from tests.support.processes import celery_worker, child_env, database_url

pytestmark = pytest.mark.browser


@pytest.fixture
def queue():
    name = f"audit-browser-{uuid.uuid4().hex[:10]}"
    before = app.conf.task_default_queue
    app.conf.task_default_queue = name
    yield name
    app.conf.task_default_queue = before


def log_in(page, live_server, user):
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill(user.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Welcome")


def test_auditor_filters_a_period_requests_a_bundle_watches_it_build_and_it_verifies(
    live_server, page, auditor, owner, team, signers, queue, tmp_path
):
    world = build_world(team)
    release = file_release(world, owner)
    services.submit_release(release, actor=owner)
    for role, signer in signers.items():
        services.sign_off(release, actor=signer, role=role, decision="approve")
    # The suite's one key, which this process and the worker both sign with.
    key = tmp_path / "ledger-key.pem"
    key.write_text(signing.public_key_pem())
    # The worker stores into this test's media folder (DATA_DIR/media), which the live
    # server reads back from for the signed download link.
    env = child_env(
        DATABASE_URL=database_url(connection.settings_dict),
        CELERY_TASK_DEFAULT_QUEUE=queue,
        DATA_DIR=str(tmp_path),
    )
    today = timezone.now().date()
    page.add_init_script(CSP_LISTENER)
    log_in(page, live_server, auditor)

    page.get_by_role("link", name="Audit").first.click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Audit")
    page.get_by_label("From").fill((today - dt.timedelta(days=1)).isoformat())
    page.get_by_label("To").fill(today.isoformat())
    page.get_by_role("button", name="Apply").click()
    # The filters are in the address, without the empty ones: a bookmark of this record.
    expect(page).to_have_url(
        re.compile(
            rf"/audit/\?date_from={today - dt.timedelta(days=1)}&date_to={today}&type=releases$"
        )
    )
    expect(page.locator("[data-type=releases] .count")).to_have_text("1")
    expect(page.locator("[data-type=signoffs] .count")).to_have_text("4")
    page.locator("[data-type=signoffs]").click()
    expect(page.get_by_role("cell", name="Security & compliance")).to_be_visible()
    screenshot(page, "audit-filtered")

    page.get_by_label("Export what these filters select as").select_option("bundle")
    page.get_by_role("button", name="Request export").click()
    export = Export.objects.get()
    expect(page).to_have_url(f"{live_server.url}/audit/exports/{export.pk}/")
    # No worker yet: the request returned at once, and the page says it waits.
    expect(page.locator("#export-state")).to_have_text("queued")
    expect(page.locator("#export-progress")).to_be_visible()
    screenshot(page, "export-queued")

    with celery_worker(env, queue):
        # The status region polls (htmx) until the worker has built the bundle.
        expect(page.locator("#export-state")).to_have_text("ready", timeout=180_000)
    export.refresh_from_db()
    assert (export.period_start.date(), export.period_end.date()) == (
        today - dt.timedelta(days=1),
        today + dt.timedelta(days=1),
    )
    expect(page.locator("#export-sha256")).to_have_text(export.sha256)
    screenshot(page, "export-ready")

    with page.expect_download() as downloading:
        page.get_by_role("button", name="Download").click()
    download = downloading.value
    bundle = tmp_path / download.suggested_filename
    download.save_as(bundle)

    assert download.suggested_filename == export.filename
    result = subprocess.run(
        [sys.executable, str(VERIFIER), str(bundle), "--key", str(key)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "key pinned" in result.stdout
    requested = Event.objects.get(action="export.requested")
    downloaded = Event.objects.get(action="export.downloaded")
    assert requested.actor == downloaded.actor == auditor
    assert downloaded.payload_data["sha256"] == export.sha256


def test_the_change_record_prints_without_the_sites_chrome(live_server, page, auditor, team, owner):
    world = build_world(team)
    release = file_release(world, owner)
    log_in(page, live_server, auditor)

    page.goto(f"{live_server.url}/releases/{release.pk}/change-record/")
    page.emulate_media(media="print")

    expect(page.locator(".topbar")).to_be_hidden()
    expect(page.locator("header.page-head .actions")).to_be_hidden()
    expect(page.get_by_role("heading", name="3. Approval")).to_be_visible()
    expect(page.get_by_text("Not rolled out.")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= page.viewport_size["width"]
    screenshot(page, "change-record-print")
