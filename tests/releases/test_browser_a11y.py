"""Keyboard and screen readers, in a real browser: axe-core finds no WCAG 2.1 A or AA
violation on the main pages; the incident screen's 30-second refresh keeps the focus
where it was; every aria-describedby of the release form points at something
rendered; the sticky Save bar does not cover the focused field; a failed save moves
the focus to the error summary; focus has a ring of the app's own.

axe-core is vendored for the tests only (tests/support/axe.min.js, `npm pack
axe-core@4.14.1`, MPL-2.0, its license header kept) and injected by Playwright into a
context that bypasses the pages' CSP; the app never serves it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.releases.test_browser_release import log_in

pytestmark = pytest.mark.browser

AXE = Path(__file__).resolve().parent.parent / "support" / "axe.min.js"
WCAG_21_AA = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
PHONE = {"width": 390, "height": 844}

# A function, not an expression: an expression string would be eval'd in the page.
RUN_AXE = """async (tags) => {
  const result = await axe.run(document, {runOnly: {type: "tag", values: tags}});
  return {
    passed: result.passes.length,
    violations: result.violations.map((v) => ({
      id: v.id, impact: v.impact, help: v.help,
      nodes: v.nodes.slice(0, 5).map((n) => n.target.join(" ") + " :: " + n.failureSummary),
    })),
  };
}"""


def _violations(page) -> list[dict]:
    page.add_script_tag(path=str(AXE))
    result = page.evaluate(RUN_AXE, WCAG_21_AA)
    assert result["passed"] > 10, f"axe checked next to nothing on {page.url}"
    return result["violations"]


@pytest.fixture
def axe_context(browser):
    """Bypasses the CSP so that Playwright may add axe's script; the pages stay as served."""
    context = browser.new_context(bypass_csp=True)
    yield context
    context.close()


def test_axe_finds_no_wcag_21_aa_violation_on_the_main_pages(
    live_server, axe_context, world, release, owner, auditor
):
    pages = {
        "home": "/",
        "services list": "/services/",
        "service page": "/services/kb-assistant/",
        "release page": f"/releases/{release.pk}/",
        "release form": f"/releases/{release.pk}/edit/",
        "incident screen": "/services/kb-assistant/incident/",
        "events list": "/events/",
    }
    found: dict[str, list[dict]] = {}
    page = axe_context.new_page()
    log_in(page, live_server, owner)
    for name, path in pages.items():
        assert page.goto(f"{live_server.url}{path}").status == 200, path
        found[name] = _violations(page)
    page.context.clear_cookies()
    log_in(page, live_server, auditor)
    assert page.goto(f"{live_server.url}/audit/").status == 200
    found["audit page"] = _violations(page)

    assert {name: v for name, v in found.items() if v} == {}


def test_the_incident_refresh_keeps_the_keyboard_focus_and_the_opened_details(
    live_server, browser, world, sre
):
    context = browser.new_context(viewport=PHONE)
    page = context.new_page()
    log_in(page, live_server, sre)
    page.goto(f"{live_server.url}/services/kb-assistant/incident/")
    page.locator("#readiness-reasons > summary").click()
    button = page.get_by_role("link", name="Record rollback")
    button.focus()
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Tab")  # reached by the keyboard, as an SRE would
    expect(button).to_be_focused()
    page.evaluate("() => { document.getElementById('record-rollback').dataset.before = 'swap'; }")

    # The 30-second poll's own request, asked for now: wait for its swap, not 30 s.
    swapped = page.evaluate(
        """() => new Promise((resolve) => {
          const region = document.getElementById("live-parts");
          document.body.addEventListener("htmx:afterSwap", () => resolve(true), {once: true});
          htmx.ajax("GET", region.getAttribute("hx-get"), {source: region, target: region, swap: "outerHTML"});
        })"""
    )

    assert swapped
    assert page.evaluate("() => document.getElementById('record-rollback').dataset.before") is None
    expect(button).to_be_focused()
    expect(page.locator("#readiness-reasons")).to_have_attribute("open", "")
    page.keyboard.press("Tab")  # the next Tab goes on from the button, not from the top
    after = page.evaluate("() => document.activeElement.closest('#rollback') !== null")
    assert after, "the next Tab left the rollback section"
    context.close()


def test_every_aria_describedby_of_the_release_form_points_at_something_rendered(
    live_server, page, world, release, owner
):
    log_in(page, live_server, owner)
    page.goto(f"{live_server.url}/releases/{release.pk}/edit/")
    references = page.evaluate(
        """() => Array.from(document.querySelectorAll("#release-form [aria-describedby]"))
          .flatMap((el) => el.getAttribute("aria-describedby").split(/\\s+/)
            .map((id) => [el.name || el.id, id, document.getElementById(id) !== null]))"""
    )
    stage_inputs = [name for name, _, _ in references if name.startswith("stage_")]
    assert len(stage_inputs) >= 25  # five stage rows of five
    assert [(name, target) for name, target, exists in references if not exists] == []
    expect(page.locator("#stage-help-traffic_pct")).to_contain_text("Share of the traffic")


def test_the_save_bar_does_not_cover_the_focused_field_on_a_phone(
    live_server, browser, world, release, owner
):
    context = browser.new_context(viewport=PHONE)
    page = context.new_page()
    log_in(page, live_server, owner)
    page.goto(f"{live_server.url}/releases/{release.pk}/edit/")
    field = page.get_by_label("Rollback target")
    # The field sits at the foot of the screen, where the bar is, when Tab reaches it from
    # the field before: the browser scrolls only what it deems out of view.
    page.evaluate(
        """() => {
          const target = document.getElementById("id_rollback_target");
          const fields = Array.from(document.querySelectorAll(
            "#release-form input:not([type=hidden]), #release-form select, #release-form textarea"));
          const top = target.getBoundingClientRect().top + window.scrollY;
          window.scrollTo(0, top - window.innerHeight + target.offsetHeight + 4);
          fields[fields.indexOf(target) - 1].focus({preventScroll: true});
        }"""
    )
    bar = page.locator(".form-actions").bounding_box()
    before = field.bounding_box()
    assert bar is not None and before is not None
    assert before["y"] + before["height"] > bar["y"], "the field is not under the bar to begin with"
    page.keyboard.press("Tab")

    expect(field).to_be_focused()
    box = field.bounding_box()
    bar = page.locator(".form-actions").bounding_box()
    assert box is not None and bar is not None
    assert box["y"] >= 0
    assert box["y"] + box["height"] <= bar["y"], (box, bar)
    context.close()


@pytest.mark.parametrize("javascript", [True, False])
def test_a_failed_save_moves_the_focus_to_the_error_summary(
    live_server, browser, world, release, owner, javascript
):
    context = browser.new_context(java_script_enabled=javascript)
    page = context.new_page()
    log_in(page, live_server, owner)
    page.goto(f"{live_server.url}/releases/{release.pk}/edit/")
    page.get_by_label("Stage 1: Traffic (%)").fill("150")

    page.get_by_role("button", name="Save draft").click()

    summary = page.locator("#error-summary")
    expect(summary).to_contain_text("Stage 1: Traffic (%)")
    expect(summary).to_be_focused()
    context.close()


def test_a_focused_link_has_a_ring_of_the_apps_own(live_server, page, owner):
    page.set_content('<a href="#x" id="plain">x</a>')
    page.keyboard.press("Tab")
    default = page.evaluate("() => getComputedStyle(document.activeElement).outlineColor")
    log_in(page, live_server, owner)
    page.goto(f"{live_server.url}/services/")
    link = page.locator("main a").first
    link.focus()
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Tab")
    expect(link).to_be_focused()

    style = link.evaluate(
        """(el) => { const s = getComputedStyle(el);
          return {width: parseFloat(s.outlineWidth), style: s.outlineStyle, color: s.outlineColor}; }"""
    )

    assert style["width"] >= 3 and style["style"] == "solid", style
    assert style["color"] != default, (style, default)
    assert style["color"] == "rgb(10, 61, 145)"  # --focus: 9.6:1 on white
