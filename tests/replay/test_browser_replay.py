"""Replay pages in a real browser: a failed check explained, the trend chart drawn, progress
followed live, and a phone's width."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from replay.models import Run
from tests.factories import PASSWORD
from tests.replay.factories import SampleSetFactory
from tests.replay.helpers import finish, make_backend, run_with_results

pytestmark = pytest.mark.browser

SCREENSHOTS = Path(os.environ.get("REPLAY_SCREENSHOTS", "/tmp"))
PHONE = {"width": 375, "height": 800}
DESKTOP = {"width": 1366, "height": 900}


def log_in(page, live_server, user):
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill(user.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Welcome")


def no_sideways_scroll(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


@pytest.fixture
def history(team):
    """kb-vllm with two finished runs of kb-smoke; the second failed a JSON Schema check."""
    backend = make_backend(team)
    sample_set = SampleSetFactory(name="kb-smoke")
    now = timezone.now()
    finish(
        run_with_results(backend, ttft=90.0, failing=0, sample_set=sample_set),
        at=now - dt.timedelta(hours=6),
    )
    failed = finish(
        run_with_results(backend, ttft=140.0, failing=1, passing=3, sample_set=sample_set),
        at=now - dt.timedelta(hours=1),
    )
    return backend, failed


def test_run_page_shows_the_failed_json_schema_check_with_its_path(
    live_server, page, owner, history
):
    _, run = history
    log_in(page, live_server, owner)
    page.set_viewport_size(DESKTOP)

    page.goto(f"{live_server.url}/replay/runs/{run.pk}/")

    failure = page.locator(".check-failure").first
    expect(failure).to_contain_text("json_schema")
    expect(failure.locator("dd").nth(0)).to_have_text("JSON valid against the schema")
    expect(failure.locator("dd").nth(1)).to_have_text("$.answer: 'four' is not of type 'integer'")
    expect(page.get_by_role("heading", level=1)).to_contain_text(f"Run {run.pk}")
    page.screenshot(path=str(SCREENSHOTS / "replay-run-desktop.png"), full_page=True)

    # Filtering the results keeps the filter in the address bar.
    page.get_by_label("Outcome").select_option("failed")
    expect(page).to_have_url(f"{live_server.url}/replay/runs/{run.pk}/?outcome=failed")
    expect(page.locator("table.results tbody tr")).to_have_count(1)


def test_run_page_fits_a_phone(live_server, page, owner, history):
    _, run = history
    log_in(page, live_server, owner)
    page.set_viewport_size(PHONE)

    page.goto(f"{live_server.url}/replay/runs/{run.pk}/")
    page.locator(".check-failure").first.scroll_into_view_if_needed()

    expect(page.locator(".check-failure").first).to_contain_text("$.answer")
    page.screenshot(path=str(SCREENSHOTS / "replay-run-phone.png"), full_page=True)
    assert no_sideways_scroll(page)


def test_backend_page_draws_the_trend_chart_beside_its_table(live_server, page, owner, history):
    backend, run = history
    log_in(page, live_server, owner)
    page.set_viewport_size(DESKTOP)

    page.goto(f"{live_server.url}/replay/backends/{backend.name}/")

    expect(page.locator(".js-plotly-plot")).to_have_count(1)
    expect(page.locator(".js-plotly-plot .main-svg").first).to_be_visible()
    table = page.locator("#trend-table")
    expect(table.locator("tbody tr")).to_have_count(2)
    expect(table).to_contain_text("75.0 %")
    expect(table.get_by_role("link", name=f"run {run.pk}")).to_be_visible()
    page.screenshot(path=str(SCREENSHOTS / "replay-backend-desktop.png"), full_page=True)

    page.set_viewport_size(PHONE)
    page.reload()
    expect(page.locator(".js-plotly-plot")).to_have_count(1)
    page.screenshot(path=str(SCREENSHOTS / "replay-backend-phone.png"), full_page=True)
    assert no_sideways_scroll(page)


def test_running_run_page_follows_progress_and_shows_the_verdict_when_done(
    live_server, page, owner, team
):
    backend = make_backend(team)
    run = run_with_results(backend, failing=1, passing=1)
    Run.objects.filter(pk=run.pk).update(state=Run.State.RUNNING, started_at=timezone.now())
    log_in(page, live_server, owner)

    page.goto(f"{live_server.url}/replay/runs/{run.pk}/")
    expect(page.locator("#run-progress")).to_contain_text("2 of 2 attempts done")
    finish(run)

    # The next poll sees the run finished and reloads the page with its verdict.
    expect(page.locator("h1 .badge")).to_have_text("failed", timeout=8000)
    expect(page.locator("#run-progress")).not_to_have_attribute("hx-trigger", "every 2s")
