"""The strict Content-Security-Policy in a real browser: every page with charts,
an htmx swap that brings a chart, the admin and the API docs draw with no
violation (a `securitypolicyviolation` listener from the first script on)."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.utils import timezone
from playwright.sync_api import expect

from ledger.models import LoadTestReport
from tests.factories import PASSWORD, UserFactory
from tests.ledger.evidence.conftest import fixture_path, import_file
from tests.ledger.factories import RevisionFactory
from tests.ledger.test_browser_evidence import kb  # noqa: F401 - the fixture
from tests.replay.factories import SampleSetFactory
from tests.replay.test_views import finish, make_backend, run_with_results

pytestmark = pytest.mark.browser

CSP_LISTENER = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', e => window.__csp.push(
  `${e.violatedDirective} blocked=${e.blockedURI} at ${e.sourceFile}:${e.lineNumber}`));
"""


@pytest.fixture
def csp_page(page):
    """A page recording CSP violations before any of its scripts runs, and the
    console's CSP complaints and uncaught errors."""
    page.add_init_script(CSP_LISTENER)
    page.csp_console = []
    page.on(
        "console",
        lambda m: "Content Security Policy" in m.text and page.csp_console.append(m.text),
    )
    page.on("pageerror", lambda e: page.csp_console.append(f"pageerror: {e}"))
    return page


def assert_no_violation(page) -> None:
    assert page.evaluate("window.__csp") == [], page.url
    assert page.csp_console == [], page.url


def visit(page, url: str) -> None:
    response = page.goto(url)
    assert response.status == 200, url
    policy = response.headers["content-security-policy"]
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy


def charts_drew(page, scope: str = "body", count: int | None = None) -> None:
    charts = page.locator(f"{scope} [data-plotly]")
    if count is not None:
        expect(charts).to_have_count(count)
    for i in range(charts.count()):
        expect(charts.nth(i).locator(".main-svg").first).to_be_visible()


def log_in(page, live_server, user) -> None:
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill(user.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Welcome")


@pytest.fixture
def evidence(kb):  # noqa: F811 - the fixture imported above
    """r1 live with reports, r2 a candidate with a sweep: a comparison on the service page."""
    r1 = kb.live_revision
    r2 = RevisionFactory(service=kb, runtime=r1.runtime, model_asset=r1.model_asset)
    with time_machine.travel(timezone.now() - dt.timedelta(days=1), tick=False):
        import_file(r1, "vllm", "vllm_c2_n20_detailed.json", workload="short")
    import_file(r2, "aiperf", "profile_export.jsonl", workload="short")
    sweep, _ = import_file(r2, "guidellm", "rate-sweep", "benchmarks.json", workload="batch")
    return sweep


def test_evidence_pages_draw_their_charts_under_the_policy(live_server, csp_page, owner, evidence):
    page = csp_page
    log_in(page, live_server, owner)

    # A load-test report: latency, throughput against latency, TTFT distribution.
    visit(page, f"{live_server.url}/services/kb-assistant/r2/loadtests/{evidence.pk}/")
    charts_drew(page, count=3)
    page.locator("#chart-latency [data-plotly]").hover()  # hover labels, the modebar
    expect(page.locator("#chart-latency .modebar")).to_have_count(1)
    expect(page.locator('#chart-latency .modebar-btn[data-title*="Share"]')).to_have_count(0)
    assert_no_violation(page)

    # The service page: live against candidate.
    visit(page, f"{live_server.url}/services/kb-assistant/")
    charts_drew(page, "#chart-comparison", count=1)
    assert_no_violation(page)

    # The revision page: choosing a file swaps in the preview (htmx), choosing the
    # workload class alone does not, and saving swaps in the Evidence section
    # with its chart drawn by the same script.
    visit(page, f"{live_server.url}/services/kb-assistant/r1/")
    charts_drew(page, "#evidence", count=1)
    previews = []
    page.on("request", lambda r: "/loadtests/preview" in r.url and previews.append(r.url))
    page.get_by_label("Workload class").select_option("streaming")
    page.get_by_label("Report file").set_input_files(
        fixture_path("sglang", "sglang_c2_n16_details.jsonl")
    )
    expect(page.locator("#preview-summary")).to_contain_text("sglang")
    expect(page.locator("#loadtest-busy")).to_be_hidden()
    assert len(previews) == 1, "the workload class alone posts no preview"
    page.get_by_label("Format").select_option("sglang")
    expect(page.locator("#preview-summary")).to_contain_text("sglang")
    assert len(previews) == 2, "a forced format previews again"
    page.get_by_role("button", name="Save report").click()
    expect(page.locator("#evidence [role=status]")).to_contain_text("Saved")
    charts_drew(page, "#evidence", count=1)
    assert LoadTestReport.objects.filter(revision__number=1).count() == 2
    assert_no_violation(page)


@pytest.fixture
def history(team):
    """kb-vllm with two finished runs of kb-smoke, the second one worse."""
    backend = make_backend(team)
    sample_set = SampleSetFactory(name="kb-smoke")
    now = timezone.now()
    first = finish(
        run_with_results(backend, ttft=90.0, failing=0, sample_set=sample_set),
        at=now - dt.timedelta(hours=6),
    )
    second = finish(
        run_with_results(backend, ttft=140.0, failing=1, passing=3, sample_set=sample_set),
        at=now - dt.timedelta(hours=1),
    )
    return backend, first, second


def test_replay_pages_draw_their_charts_under_the_policy(live_server, csp_page, owner, history):
    backend, first, second = history
    page = csp_page
    log_in(page, live_server, owner)

    visit(page, f"{live_server.url}/replay/backends/{backend.name}/")
    charts_drew(page, count=1)
    assert_no_violation(page)

    visit(page, f"{live_server.url}/replay/runs/compare?a={first.pk}&b={second.pk}")
    charts_drew(page, count=2)
    assert_no_violation(page)


def test_admin_and_api_docs_render_under_the_policy(live_server, csp_page):
    admin = UserFactory(username="root", is_staff=True, is_superuser=True)
    page = csp_page

    visit(page, f"{live_server.url}/admin/login/")
    page.get_by_label("Username").fill(admin.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.locator("#site-name")).to_contain_text("Inference Release Ledger")
    for path in (
        "/admin/",
        "/admin/authtoken/tokenproxy/",
        "/admin/authtoken/tokenproxy/add/",
        "/admin/auth/user/",
        f"/admin/auth/user/{admin.pk}/change/",
        "/admin/django_celery_beat/periodictask/add/",
        "/admin/ledger/service/",
    ):
        visit(page, f"{live_server.url}{path}")
        expect(page.locator("#content")).to_be_visible()
        assert_no_violation(page)

    visit(page, f"{live_server.url}/api/docs/")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("Inference Release Ledger API")
    expect(page.locator(".swagger-ui .opblock").first).to_be_visible()
    assert_no_violation(page)
