"""The registry pages in a real browser: inline validation, live search, a phone's width."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from ledger import services
from ledger.models import ModelAsset, Service
from tests.factories import PASSWORD
from tests.ledger.factories import (
    LicenseFactory,
    ModelAssetFactory,
    RevisionFactory,
    ServiceFactory,
    digest,
)

pytestmark = pytest.mark.browser


def log_in(page, live_server, user):
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill(user.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Welcome")


def test_owner_fixes_a_bad_digest_shown_while_typing_and_registers_the_asset(
    live_server, page, owner, team
):
    apache = LicenseFactory()
    log_in(page, live_server, owner)
    page.goto(f"{live_server.url}/assets/new")

    page.locator("#id_name").fill("Qwen2.5-7B-Instruct-AWQ")
    page.locator("#id_revision").fill("a1b2c3d")
    page.locator("#id_family").fill("qwen2.5")
    page.locator("#id_source_repository").fill("Qwen/Qwen2.5-7B-Instruct-AWQ")
    page.locator("#id_quantization").select_option("int4-awq")
    page.get_by_label("License").select_option(str(apache.pk))
    for name in ("tokenizer", "chat_template", "generation_config", "config"):
        page.locator(f"#id_{name}_digest").fill(digest(name))

    # Type a digest that is too short, and do not submit.
    page.locator("#id_weights_digest").press_sequentially("sha256:abc123", delay=15)
    error = page.locator("#field-weights_digest .errorlist")
    expect(error).to_contain_text("It has 6 hexadecimal characters; a sha256 digest has 64.")
    expect(page.locator("#id_weights_digest")).to_have_attribute("aria-invalid", "true")
    expect(page).to_have_url(f"{live_server.url}/assets/new")
    assert not ModelAsset.objects.exists()

    # The field was swapped under the cursor: typing goes on in the same field.
    expect(page.locator("#id_weights_digest")).to_be_focused()
    page.keyboard.press("ControlOrMeta+a")
    page.keyboard.type(digest("weights"))
    expect(error).to_have_count(0)
    expect(page.locator("#id_weights_digest")).to_have_value(digest("weights"))

    page.get_by_role("button", name="Register asset").click()

    expect(page).to_have_url(re.compile(r"/assets/\d+/$"))
    asset = ModelAsset.objects.get(name="Qwen2.5-7B-Instruct-AWQ")
    assert page.url == f"{live_server.url}/assets/{asset.pk}/"
    expect(page.get_by_role("heading", level=1)).to_contain_text("Qwen2.5-7B-Instruct-AWQ")
    expect(page.get_by_text(f"Registered {asset}.")).to_be_visible()
    assert asset.weights_digest == digest("weights")


def test_catalog_search_filters_without_reloading_the_page(live_server, page, owner, team):
    ServiceFactory(team=team, slug="kb-assistant", tier="production")
    ServiceFactory(team=team, slug="dataagent-sql")
    log_in(page, live_server, owner)
    page.goto(f"{live_server.url}/services/")
    results = page.locator("#results")
    expect(results).to_contain_text("dataagent-sql")
    # Anything a reload would wipe out.
    page.evaluate("window.__notReloaded = true")
    page.evaluate("document.body.insertAdjacentHTML('beforeend', '<i id=before-search></i>')")

    page.get_by_label("Search", exact=True).press_sequentially("kb-a", delay=30)

    expect(page).to_have_url(re.compile(r"/services/\?q=kb-a$"))
    expect(results).to_contain_text("kb-assistant")
    expect(results).not_to_contain_text("dataagent-sql")
    assert page.evaluate("window.__notReloaded") is True
    expect(page.locator("#before-search")).to_have_count(1)

    page.get_by_label("Tier").select_option("internal")

    expect(page).to_have_url(re.compile(r"/services/\?q=kb-a&tier=internal$"))
    expect(results).to_contain_text("No service matches these filters")
    assert page.evaluate("window.__notReloaded") is True

    page.go_back()
    expect(page).to_have_url(re.compile(r"/services/\?q=kb-a$"))
    expect(results).to_contain_text("kb-assistant")


def test_top_bar_search_lists_matches_and_one_match_goes_to_its_incident_screen(
    live_server, page, owner, team
):
    ServiceFactory(team=team, slug="kb-assistant")
    ServiceFactory(team=team, slug="kb-search")
    ServiceFactory(team=team, slug="dataagent-sql")
    log_in(page, live_server, owner)

    page.get_by_role("searchbox", name="Find a service or model").fill("kb")
    page.keyboard.press("Enter")

    expect(page).to_have_url(f"{live_server.url}/search/?q=kb")
    results = page.locator(".search-results")
    expect(results.get_by_role("link", name="kb-assistant")).to_be_visible()
    expect(results.get_by_role("link", name="kb-search")).to_be_visible()
    expect(results.get_by_role("link", name="dataagent-sql")).to_have_count(0)

    page.get_by_role("searchbox", name="Find a service or model").first.fill("data")
    page.keyboard.press("Enter")
    expect(page).to_have_url(f"{live_server.url}/services/dataagent-sql/incident/")


def test_service_page_fits_a_phone_without_sideways_scrolling(live_server, page, owner, team):
    service = ServiceFactory(team=team, slug="kb-assistant", tier="production", slo_ttft_p95_ms=800)
    revision = RevisionFactory(service=service)
    services.set_live_revision(service, revision, actor=None)
    for kind, value in [
        ("streaming", "sse"),
        ("metrics", ["vllm:num_requests_running", "vllm:gpu_cache_usage_perc"]),
        ("error_codes", {"429": "queue full at the gateway; retry after the header says"}),
    ]:
        services.declare_capability(revision, actor=None, kind=kind, value=value)
    RevisionFactory(service=Service.objects.get(pk=service.pk))
    page.set_viewport_size({"width": 375, "height": 740})
    log_in(page, live_server, owner)

    page.goto(f"{live_server.url}/services/kb-assistant/")
    expect(page.get_by_role("heading", level=2, name="Live revision")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 375

    # The full fingerprint, opened, still wraps inside the screen.
    page.locator("details.fingerprint summary").first.click()
    expect(page.locator("details.fingerprint .full").first).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 375


def test_registry_pages_and_a_form_with_errors_fit_a_phone(live_server, page, owner, team):
    service = ServiceFactory(team=team, slug="kb-assistant")
    revision = RevisionFactory(service=service)
    page.set_viewport_size({"width": 375, "height": 740})
    log_in(page, live_server, owner)
    pages = [
        "/services/",
        f"/assets/{revision.model_asset.pk}/",
        f"/runtimes/{revision.runtime.name}/",
        "/services/kb-assistant/r1/",
        "/events/",
    ]

    for path in pages:
        page.goto(f"{live_server.url}{path}")
        assert page.evaluate("document.documentElement.scrollWidth") <= 375, path

    # Error messages quote a full example digest; they wrap instead of widening the page.
    page.goto(f"{live_server.url}/assets/new")
    page.locator("#id_weights_digest").fill("sha256:abc")
    page.get_by_role("button", name="Register asset").click()
    expect(page.locator(".error-summary")).to_contain_text("Weights digest")
    assert page.evaluate("document.documentElement.scrollWidth") <= 375


def test_revision_diff_fits_a_phone_and_its_form_picks_another_pair(live_server, page, owner, team):
    service = ServiceFactory(team=team, slug="kb-assistant")
    r1 = RevisionFactory(service=service, runtime__launch_parameters={"max_model_len": 8192})
    services.set_live_revision(service, r1, actor=None)
    services.declare_capability(
        r1, actor=None, kind="structured_output", value=["json_schema", "regex"]
    )
    r2 = services.new_revision_from(
        r1, actor=None, model_asset=ModelAssetFactory(team=team), context_limit=8192
    )
    services.declare_capability(r2, actor=None, kind="structured_output", value=["regex"])
    services.new_revision_from(r1, actor=None)
    page.set_viewport_size({"width": 375, "height": 740})
    log_in(page, live_server, owner)

    page.goto(f"{live_server.url}/services/kb-assistant/diff/1/2/")
    expect(page.get_by_role("heading", level=1)).to_have_text("kb-assistant: r1 → r2")
    expect(page.locator("table.diff .badge.bad").first).to_have_text("breaking")
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    page.locator("table.diff details.fingerprint summary").first.click()
    assert page.evaluate("document.documentElement.scrollWidth") <= 375

    page.get_by_label("From").select_option("3")
    page.get_by_role("button", name="Compare").click()
    expect(page).to_have_url(f"{live_server.url}/services/kb-assistant/diff/3/2/")
