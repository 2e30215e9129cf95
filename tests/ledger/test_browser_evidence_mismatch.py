"""Evidence of another model in a real browser: the preview says what the file measured
against the revision, Save is refused until a reason is given, and the saved report
says mismatched; with scripts and without, on a phone's width."""

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
from tests.ledger.test_browser_evidence import log_in, no_sideways_scroll

pytestmark = pytest.mark.browser

VLLM = fixture_path("vllm", "vllm_c2_n20_detailed.json")  # gemma-3-270m on llama-cpp-python
REASON = "measured on a different model — format check with the 270M stand-in"


@pytest.fixture
def sql(team):
    """dataagent-sql r1, live: Qwen2.5-7B-Instruct on vLLM, 1 x H100."""
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
        model_asset=ModelAssetFactory(team=team, name="Qwen2.5-7B-Instruct"),
        runtime=RuntimeFactory(team=team, gpu_model="H100-80GB", gpu_count=1),
    )
    services.set_live_revision(service, revision, actor=None)
    return revision


@pytest.mark.parametrize("width", [1280, 390])
def test_the_preview_names_the_mismatch_and_save_needs_a_reason(
    live_server, page, owner, sql, width
):
    page.set_viewport_size({"width": width, "height": 900})
    log_in(page, live_server, owner)
    page.goto(f"{live_server.url}/services/dataagent-sql/r1/")

    page.get_by_label("Workload class").select_option("short")
    page.get_by_label("Report file").set_input_files(VLLM)

    warning = page.locator("#mismatch-warning")
    expect(warning).to_contain_text("the file says gemma-3-270m")
    expect(warning).to_contain_text("llama-cpp-python-0.3.36 (llama.cpp)")
    expect(page.locator("#preview-summary")).to_contain_text("r1 runs vLLM")
    reason = page.get_by_label("Measured on a different model, engine or GPU — reason")
    expect(reason).to_be_visible()
    assert no_sideways_scroll(page)

    page.get_by_role("button", name="Save report").click()

    expect(page.locator("#field-accept_mismatch .errorlist")).to_contain_text(
        "measured something other than dataagent-sql r1"
    )
    assert not LoadTestReport.objects.exists()
    assert page.locator("#id_file").evaluate("input => input.files.length") == 1

    page.get_by_label("Measured on a different model, engine or GPU — reason").fill(REASON)
    page.get_by_role("button", name="Save report").click()

    expect(page.locator("#evidence [role=status]")).to_contain_text("Saved")
    report = LoadTestReport.objects.get()
    assert report.mismatch["reason"] == REASON
    row = page.locator(f"#report-{report.pk}")
    expect(row.locator(".badge.bad")).to_have_text("mismatched")
    expect(row).to_contain_text(REASON)
    assert no_sideways_scroll(page)


def test_without_javascript_the_plain_form_asks_for_the_reason(live_server, browser, owner, sql):
    context = browser.new_context(java_script_enabled=False, viewport={"width": 390, "height": 800})
    page = context.new_page()
    try:
        log_in(page, live_server, owner)
        page.goto(f"{live_server.url}/services/dataagent-sql/r1/loadtests/new")
        reason = page.get_by_label("Measured on a different model, engine or GPU — reason")
        expect(reason).to_be_visible()

        page.get_by_label("Workload class").select_option("short")
        page.get_by_label("Report file").set_input_files(VLLM)
        page.get_by_role("button", name="Save report").click()

        expect(page.locator("#field-accept_mismatch .errorlist")).to_contain_text(
            "the file says gemma-3-270m; r1 serves Qwen2.5-7B-Instruct"
        )
        assert not LoadTestReport.objects.exists()

        page.get_by_label("Report file").set_input_files(VLLM)
        page.get_by_label("Measured on a different model, engine or GPU — reason").fill(REASON)
        page.get_by_role("button", name="Save report").click()

        expect(page.locator("h1 .badge")).to_have_text("mismatched")
        expect(page.locator("#mismatch-notice")).to_contain_text(REASON)
        assert LoadTestReport.objects.get().mismatch["fields"] == ["model", "engine"]
    finally:
        context.close()
