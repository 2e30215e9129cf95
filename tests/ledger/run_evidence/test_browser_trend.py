"""The run-evidence trend in a real browser: drawn under the strict CSP, read on a phone."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from ledger import services
from tests.foundation.test_browser_csp import assert_no_violation, charts_drew, csp_page, visit
from tests.ledger.run_evidence.conftest import day
from tests.ledger.test_browser_evidence import PHONE, log_in, no_sideways_scroll

__all__ = ["csp_page"]  # the fixture, imported for these tests

pytestmark = pytest.mark.browser


def test_the_trend_draws_under_the_policy_and_fits_a_phone(
    live_server, csp_page, sre, service, live
):
    today = timezone.now().astimezone(dt.UTC).date()
    for back in range(1, 31):
        drift = 0.0 if back > 10 else 40.0 * (11 - back)
        services.record_run_summary(
            service,
            actor=None,
            date=today - dt.timedelta(days=back),
            **day(ttft_p95_ms=600.0 + drift, ttft_p99_ms=1500.0 + drift),
        )
    page = csp_page
    log_in(page, live_server, sre)

    visit(page, f"{live_server.url}/services/kb-assistant/")
    charts_drew(page, "#chart-run-trend", count=1)
    assert_no_violation(page)
    page.get_by_text("The numbers, day by day").click()
    expect(page.locator("#chart-run-trend table tbody tr")).to_have_count(30)
    expect(page.locator("#chart-run-trend .badge.bad").first).to_be_visible()

    page.set_viewport_size(PHONE)
    visit(page, f"{live_server.url}/services/kb-assistant/")
    charts_drew(page, "#chart-run-trend", count=1)
    assert no_sideways_scroll(page)
