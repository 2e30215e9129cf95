"""Per-request files in a real browser: the preview reads the model from the request bodies,
and a file that names none is previewed and saved as unverified (issue 27, item 3)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from playwright.sync_api import expect

from ledger import services
from ledger.models import LoadTestReport
from tests.ledger.evidence.conftest import fixture_path
from tests.ledger.factories import (
    ModelAssetFactory,
    RevisionFactory,
    RuntimeFactory,
    ServiceFactory,
)
from tests.ledger.test_browser_evidence import log_in

pytestmark = pytest.mark.browser

GENAI_PERF = fixture_path("genai_perf", "profile_export.json")  # bodies name gemma-3-270m
AIPERF = fixture_path("aiperf", "profile_export.jsonl")  # records: no body, no model


@pytest.fixture
def awq(team):
    """dataagent-sql r1, live: a 7B AWQ model on vLLM, 1 x H100."""
    service = ServiceFactory(
        slug="dataagent-sql",
        team=team,
        tier="production",
        slo_ttft_p95_ms=800,
        slo_ttft_p99_ms=1500,
        slo_tpot_ms=30,
        slo_error_rate_pct=Decimal("1.00"),
    )
    revision = RevisionFactory(
        service=service,
        model_asset=ModelAssetFactory(team=team, name="Qwen2.5-7B-Instruct-AWQ"),
        runtime=RuntimeFactory(team=team, gpu_model="H100-80GB", gpu_count=1),
    )
    services.set_live_revision(service, revision, actor=None)
    return revision


def test_per_request_files_are_checked_or_saved_unverified(live_server, page, owner, awq):
    log_in(page, live_server, owner)
    page.goto(f"{live_server.url}/services/dataagent-sql/r1/")
    page.get_by_label("Workload class").select_option("short")

    page.get_by_label("Report file").set_input_files(GENAI_PERF)
    expect(page.locator("#mismatch-warning")).to_contain_text("the file says gemma-3-270m")

    page.get_by_label("Report file").set_input_files(AIPERF)
    expect(page.locator("#unverified-warning")).to_be_visible()
    expect(page.locator("#mismatch-warning")).to_have_count(0)
    page.get_by_role("button", name="Save report").click()

    expect(page.locator("#evidence [role=status]")).to_contain_text("Saved")
    report = LoadTestReport.objects.get()
    assert not report.model_verified
    row = page.locator(f"#report-{report.pk}")
    expect(row).to_contain_text("unverified")
    expect(row).to_contain_text("production services count only evidence that names its model")
