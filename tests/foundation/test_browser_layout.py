"""The layout in a real browser: the top bar on a phone, pages without JavaScript,
charts that cannot draw, print, chart labels at phone width, and what renders
before plotly.js has arrived (templates/base.html, static/css/ledger.css,
static/js/charts.js, lib/charts.py)."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from playwright.sync_api import expect

from ledger import services
from ledger.demo.evidence import LOADTEST_DIR
from tests.factories import PASSWORD
from tests.foundation import test_browser_csp
from tests.ledger import test_browser_evidence

pytestmark = pytest.mark.browser

# Fixtures shared with the evidence and policy tests: kb-assistant with r1 live;
# r2 a candidate with reports, so that the service page compares them in a chart.
kb = test_browser_evidence.kb
evidence = test_browser_csp.evidence

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}
# One row: the search field's height plus the bar's padding, with room to spare.
ONE_ROW_PX = 64


@pytest.fixture
def context_of(browser):
    """A new browser context (JavaScript on or off, any viewport), closed after the test."""
    contexts = []

    def make(*, javascript: bool = True, viewport: dict = PHONE):
        context = browser.new_context(java_script_enabled=javascript, viewport=viewport)
        contexts.append(context)
        return context.new_page()

    yield make
    for context in contexts:
        context.close()


def log_in(page, live_server, user) -> None:
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill(user.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Welcome")


def topbar_height(page) -> float:
    return page.locator("header.topbar").bounding_box()["height"]


@pytest.mark.parametrize("javascript", [True, False], ids=["js", "no-js"])
def test_on_a_phone_the_top_bar_is_one_row_and_its_menu_unfolds(
    live_server,
    context_of,
    owner,
    kb,
    javascript,
):
    page = context_of(javascript=javascript)
    log_in(page, live_server, owner)
    page.goto(f"{live_server.url}/services/kb-assistant/")

    assert topbar_height(page) <= ONE_ROW_PX
    expect(page.get_by_role("search").get_by_role("searchbox")).to_be_visible()
    assets = page.get_by_role("navigation", name="Main").get_by_role("link", name="Assets")
    expect(assets).to_be_hidden()
    expect(page.get_by_role("button", name="Log out")).to_be_hidden()

    page.locator("header .menu > summary").click()
    expect(assets).to_be_visible()
    expect(page.get_by_role("button", name="Log out")).to_be_visible()
    assert topbar_height(page) <= ONE_ROW_PX, "the menu unfolds over the page, not in the bar"
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    assets.click()
    expect(page).to_have_url(f"{live_server.url}/assets/")


def test_on_a_desktop_the_navigation_is_the_bar_itself(live_server, context_of, owner, kb):
    page = context_of(viewport=DESKTOP)
    log_in(page, live_server, owner)

    assert topbar_height(page) <= ONE_ROW_PX
    expect(page.locator("header .menu > summary")).to_be_hidden()
    nav = page.get_by_role("navigation", name="Main")
    for name in ("Home", "Services", "Assets", "Runtimes", "Events", "Replay", "API"):
        expect(nav.get_by_role("link", name=name)).to_be_visible()
    expect(page.get_by_role("button", name="Log out")).to_be_visible()


def test_without_javascript_nothing_says_loading_and_tables_stand_in_for_charts(
    live_server,
    context_of,
    owner,
    evidence,
):
    page = context_of(javascript=False)
    log_in(page, live_server, owner)

    page.goto(f"{live_server.url}/services/")
    expect(page.get_by_role("heading", level=1)).to_be_visible()
    assert page.locator(".htmx-indicator").count() >= 1
    expect(page.locator(".htmx-indicator")).to_be_hidden()

    page.goto(f"{live_server.url}/services/kb-assistant/")
    figure = page.locator("#chart-comparison")
    expect(figure.locator("table")).to_be_visible()
    expect(figure.locator(".chart-box")).to_be_hidden()
    expect(figure.get_by_text("swipe it sideways")).to_be_hidden()
    # No blank space where the chart would be: the table follows the section heading.
    heading = page.locator("#comparison-heading").bounding_box()
    table = figure.locator("table").bounding_box()
    assert table["y"] - (heading["y"] + heading["height"]) < 80

    page.goto(f"{live_server.url}/services/kb-assistant/r2/loadtests/{evidence.pk}/")
    expect(page.locator("[data-plotly]")).to_have_count(3)
    for i in range(3):
        expect(page.locator("[data-plotly]").nth(i)).to_be_hidden()
    expect(page.locator(".chart-table")).to_have_count(3)
    for i in range(3):
        expect(page.locator(".chart-table").nth(i)).to_be_visible()


def test_a_chart_whose_script_does_not_load_leaves_its_table(
    live_server,
    context_of,
    owner,
    evidence,
):
    page = context_of()
    log_in(page, live_server, owner)
    page.route("**/vendor/plotly-basic-*.min.js", lambda route: route.abort())

    page.goto(f"{live_server.url}/services/kb-assistant/")

    expect(page.locator("html.charts-unavailable")).to_have_count(1)
    figure = page.locator("#chart-comparison")
    expect(figure.locator(".chart-box")).to_be_hidden()
    expect(figure.get_by_text("swipe it sideways")).to_be_hidden()
    expect(figure.locator("table")).to_be_visible()


def test_the_live_revision_renders_before_plotly_arrives(
    live_server,
    context_of,
    owner,
    evidence,
):
    """The charts' script is deferred: held back, the page is there all the same."""
    page = context_of()
    log_in(page, live_server, owner)
    held = []
    page.route("**/vendor/plotly-basic-*.min.js", lambda route: held.append(route))

    page.goto(f"{live_server.url}/services/kb-assistant/", wait_until="commit")

    expect(page.get_by_role("heading", name="Live revision")).to_be_visible()
    expect(page.locator("#live-heading + dl.facts")).to_contain_text("r1")
    # A function, not an expression: Playwright evaluates an expression string with eval
    # in the page, which the page's CSP refuses when the wait has to poll.
    page.wait_for_function(
        "() => window.performance.getEntriesByName('first-contentful-paint').length > 0"
    )
    assert len(held) == 1, "plotly.js was asked for, and is still on its way"
    assert page.evaluate("typeof window.Plotly") == "undefined"

    held[0].continue_()
    expect(page.locator("#chart-comparison [data-plotly] .main-svg").first).to_be_visible()


def test_print_shows_every_fingerprint_whole(live_server, context_of, owner, kb):
    page = context_of(viewport=DESKTOP)
    log_in(page, live_server, owner)
    page.goto(f"{live_server.url}/services/kb-assistant/")
    fingerprint = kb.live_revision.fingerprint
    live = page.locator("#live-heading + dl.facts details.fingerprint")
    expect(live.locator(".full")).to_be_hidden()  # on screen: collapsed, opened on demand

    page.emulate_media(media="print")

    expect(live.locator(".full")).to_be_visible()
    expect(live.locator(".full")).to_have_text(fingerprint)
    expect(live.locator("summary")).to_be_hidden()
    details = page.locator("main details")
    assert details.count() >= 2
    for i in range(details.count()):
        expect(details.nth(i).locator(":scope > :not(summary)").first).to_be_visible()
    expect(page.locator("header.topbar")).to_be_hidden()


def _overlapping(boxes: list[dict], gap: float = 3) -> list[tuple[dict, dict]]:
    """Pairs of boxes closer than `gap` px: labels that read as one."""

    def meet(a: dict, b: dict) -> bool:
        return (
            a["x"] < b["x"] + b["width"] + gap
            and b["x"] < a["x"] + a["width"] + gap
            and a["y"] < b["y"] + b["height"] + gap
            and b["y"] < a["y"] + a["height"] + gap
        )

    return [(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1 :] if meet(a, b)]


@pytest.fixture
def demo_sweep(kb):
    """The demo's GuideLLM sweep: three load levels whose close values label side by side."""
    path = LOADTEST_DIR / "guidellm_rate_sweep.json"
    report, _ = services.import_loadtest_report(
        kb.live_revision,
        actor=None,
        workload="high_concurrency",
        file=SimpleUploadedFile(path.name, path.read_bytes()),
        filename=path.name,
    )
    return report


def test_chart_value_labels_do_not_run_into_each_other_on_a_phone(
    live_server, context_of, owner, demo_sweep
):
    page = context_of()
    log_in(page, live_server, owner)
    report = demo_sweep
    page.goto(f"{live_server.url}/services/kb-assistant/r1/loadtests/{report.pk}/")
    chart = page.locator("#chart-latency [data-plotly]")
    expect(chart.locator(".main-svg").first).to_be_visible()

    labels = chart.locator("text.bartext")
    boxes = [
        box
        for i in range(labels.count())
        if labels.nth(i).is_visible() and (box := labels.nth(i).bounding_box()) is not None
    ]

    sizes = [
        float(labels.nth(i).evaluate("e => getComputedStyle(e).fontSize").removesuffix("px"))
        for i in range(labels.count())
        if labels.nth(i).is_visible()
    ]

    assert labels.count() > 0, "the chart has value labels"
    assert _overlapping(boxes) == [], "labels closer than a readable gap"
    assert all(size >= 10 for size in sizes), f"labels shrunk to {min(sizes)} px"
