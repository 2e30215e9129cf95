"""Load-test evidence in a real browser: upload with a preview, the report's charts
drawn by plotly, and the SLO matrix on a phone.

Set EVIDENCE_SCREENSHOTS to a folder to keep screenshots of the pages at phone
and desktop widths.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from decimal import Decimal
from pathlib import Path

import pytest
import time_machine
from django.utils import timezone
from playwright.sync_api import expect

from ledger import services
from ledger.models import LoadTestReport, Service
from tests.factories import PASSWORD
from tests.ledger.evidence.conftest import fixture_path, import_file, sample_asset, sample_runtime
from tests.ledger.factories import RevisionFactory, ServiceFactory

pytestmark = pytest.mark.browser

PHONE = {"width": 375, "height": 740}
DESKTOP = {"width": 1280, "height": 900}


def log_in(page, live_server, user):
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill(user.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Welcome")


def screenshot(page, name: str) -> None:
    """The whole page, in slices of about two screens (a long page is hard to read whole)."""
    folder = os.environ.get("EVIDENCE_SCREENSHOTS")
    if not folder:
        return
    Path(folder).mkdir(parents=True, exist_ok=True)
    width = page.viewport_size["width"]
    height = page.evaluate("document.documentElement.scrollHeight")
    step = 1400 if width < 600 else 1000
    for i, top in enumerate(range(0, height, step)):
        clip = {"x": 0, "y": top, "width": width, "height": min(step, height - top)}
        page.screenshot(path=str(Path(folder) / f"{name}-{i:02d}.png"), full_page=True, clip=clip)


def no_sideways_scroll(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth") <= page.viewport_size["width"]


@pytest.fixture
def kb(team):
    """kb-assistant (production, with SLOs), r1 live on 2 x H100."""
    service = ServiceFactory(
        slug="kb-assistant",
        team=team,
        tier="production",
        slo_ttft_p95_ms=800,
        slo_ttft_p99_ms=1500,
        slo_tpot_ms=30,
        slo_error_rate_pct=Decimal("1.00"),
    )
    # What the sample files measured: gemma-3-270m on llama.cpp.
    runtime = sample_runtime(team)
    revision = RevisionFactory(service=service, runtime=runtime, model_asset=sample_asset(team))
    services.set_live_revision(service, revision, actor=None)
    return Service.objects.select_related("live_revision__runtime").get(pk=service.pk)


def test_owner_previews_saves_a_guidellm_sweep_and_sees_its_curve(live_server, page, owner, kb):
    log_in(page, live_server, owner)
    page.goto(f"{live_server.url}/services/kb-assistant/r1/")
    expect(page.locator("#evidence")).to_contain_text("No load-test report yet")

    page.get_by_label("Workload class").select_option("batch")
    page.get_by_label("Report file").set_input_files(
        fixture_path("guidellm", "rate-sweep", "benchmarks.json")
    )

    # Choosing the file shows what it says; nothing is saved yet.
    preview = page.locator("#preview-summary")
    expect(preview).to_contain_text("What benchmarks.json says")
    expect(preview).to_contain_text("guidellm 0.8.1")
    expect(preview).to_contain_text("not saved yet")
    expect(preview.locator("table.levels-conditions tbody tr")).to_have_count(3)
    expect(preview.locator("table.levels-conditions")).to_contain_text("constant@1.00")
    assert not LoadTestReport.objects.exists()
    # The swapped form kept the chosen file and the chosen class.
    assert page.locator("#id_file").evaluate("input => input.files.length") == 1
    expect(page.get_by_label("Workload class")).to_have_value("batch")
    screenshot(page, "upload-preview")

    page.get_by_role("button", name="Save report").click()

    expect(page.locator("#evidence [role=status]")).to_contain_text(
        "Saved benchmarks.json as batch evidence."
    )
    report = LoadTestReport.objects.get()
    row = page.locator(f"#report-{report.pk}")
    expect(row).to_contain_text("guidellm 0.8.1")
    expect(row).to_contain_text("current")
    assert page.locator("#id_file").evaluate("input => input.files.length") == 0
    # The swapped-in section draws its chart too.
    expect(page.locator("#evidence #chart-latency .js-plotly-plot svg").first).to_be_visible()

    row.get_by_role("link", name="Batch").click()

    expect(page).to_have_url(re.compile(rf"/services/kb-assistant/r1/loadtests/{report.pk}/$"))
    curve = page.locator("#chart-throughput-latency")
    expect(curve.locator(".js-plotly-plot svg").first).to_be_visible()
    expect(curve.locator("table")).to_contain_text("constant@0.20")
    expect(curve.locator("table tbody tr")).to_have_count(3)
    expect(page.locator("#capacity")).to_contain_text("GPU-hours per million output tokens")


def test_save_waits_while_the_file_is_read_and_then_saves_in_place(live_server, page, owner, kb):
    """The summary a preview brings moves Save report down: a click aimed at it while the
    file is read would land on whatever slides under the pointer, so it is disabled then.
    The browser holds the preview request until the button has been seen disabled."""
    log_in(page, live_server, owner)
    page.goto(f"{live_server.url}/services/kb-assistant/r1/")
    held = []
    page.route("**/loadtests/preview", lambda route: held.append(route))
    save = page.get_by_role("button", name="Save report")

    page.get_by_label("Workload class").select_option("batch")
    page.get_by_label("Report file").set_input_files(
        fixture_path("guidellm", "rate-sweep", "benchmarks.json")
    )
    expect(page.locator("#loadtest-busy")).to_be_visible()
    expect(save).to_be_disabled()
    held[0].continue_()

    expect(page.locator("#preview-summary")).to_contain_text("not saved yet")
    expect(save).to_be_enabled()
    save.click()
    expect(page.locator("#evidence [role=status]")).to_contain_text("Saved benchmarks.json")
    assert LoadTestReport.objects.count() == 1


def test_a_click_just_after_the_preview_arrives_saves_through_htmx(live_server, page, owner, kb):
    """htmx wires swapped-in content only when it settles: with a settle delay, a click
    in that gap submits the form natively and leaves the page. The click here comes in
    the task right after the swap."""
    log_in(page, live_server, owner)
    url = f"{live_server.url}/services/kb-assistant/r1/"
    page.goto(url)
    page.evaluate(
        """() => document.body.addEventListener('htmx:afterSwap', () => setTimeout(() => {
            document.querySelector('#loadtest-form button[type=submit]').click()
        }), {once: true})"""
    )

    page.get_by_label("Workload class").select_option("batch")
    page.get_by_label("Report file").set_input_files(
        fixture_path("guidellm", "rate-sweep", "benchmarks.json")
    )

    expect(page.locator("#evidence [role=status]")).to_contain_text("Saved benchmarks.json")
    assert page.url == url
    assert LoadTestReport.objects.count() == 1


def test_a_bad_file_shows_where_it_is_wrong_before_anything_is_saved(live_server, page, owner, kb):
    log_in(page, live_server, owner)
    page.goto(f"{live_server.url}/services/kb-assistant/r1/")

    page.get_by_label("Report file").set_input_files(fixture_path("broken", "vllm_truncated.json"))

    error = page.locator("#field-file .errorlist")
    expect(error).to_contain_text("vllm_truncated.json: line 1, column 5001")
    expect(page.locator("#error-summary")).to_contain_text("vllm_truncated.json")
    screenshot(page, "upload-error")
    assert not LoadTestReport.objects.exists()


@pytest.fixture
def evidence_set(kb):
    r1 = kb.live_revision
    candidate = RevisionFactory(service=kb, runtime=r1.runtime, model_asset=r1.model_asset)
    with time_machine.travel(timezone.now() - dt.timedelta(days=100), tick=False):
        import_file(r1, "guidellm", "rate-sweep", "benchmarks.json", workload="batch")
    import_file(r1, "vllm", "vllm_c2_n20_detailed.json", workload="short")
    import_file(candidate, "aiperf", "profile_export.jsonl", workload="short")
    import_file(
        candidate, "inference_perf", "summary_lifecycle_metrics.json", workload="high_concurrency"
    )
    sweep, _ = import_file(candidate, "guidellm", "rate-sweep", "benchmarks.json", workload="batch")
    return sweep


@pytest.mark.parametrize("size", [PHONE, DESKTOP], ids=["phone", "desktop"])
def test_slo_matrix_and_report_page_read_on_a_phone_and_a_desktop(
    live_server, page, owner, evidence_set, size
):
    page.set_viewport_size(size)
    log_in(page, live_server, owner)
    name = "phone" if size is PHONE else "desktop"

    page.goto(f"{live_server.url}/services/kb-assistant/")
    matrix = page.locator("#slo-matrix")
    expect(matrix.locator("table.slo-matrix")).to_have_count(2)
    expect(matrix).to_contain_text("met")
    expect(matrix).to_contain_text("stale")
    expect(page.locator("#chart-comparison .js-plotly-plot svg").first).to_be_visible()
    assert no_sideways_scroll(page)
    screenshot(page, f"service-{name}")

    page.goto(f"{live_server.url}/services/kb-assistant/r2/loadtests/{evidence_set.pk}/")
    for chart in ("chart-latency", "chart-throughput-latency", "chart-ttft-cdf"):
        expect(page.locator(f"#{chart} .js-plotly-plot svg").first).to_be_visible()
    assert no_sideways_scroll(page)
    screenshot(page, f"report-{name}")

    page.goto(f"{live_server.url}/services/kb-assistant/r2/")
    expect(page.locator("#chart-latency .js-plotly-plot svg").first).to_be_visible()
    page.get_by_label("Report file").set_input_files(
        fixture_path("sglang", "sglang_c2_n16_details.jsonl")
    )
    expect(page.locator("#preview-summary")).to_contain_text("sglang")
    assert no_sideways_scroll(page)
    screenshot(page, f"revision-{name}")
