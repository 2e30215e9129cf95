"""The demo model owner makes a new revision of a demo service in a real browser.

The demo runtimes belong to the platform team, which the owner is not in: the
revision form must still offer them, and "New revision from this one" must keep
the runtime the source revision had.
"""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from ledger.models import Revision, Service

pytestmark = pytest.mark.browser


@pytest.fixture
def demo(db):
    call_command("seed_demo", "--quiet-logins", stdout=StringIO())


def log_in_as_demo_owner(page, live_server):
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill("owner")
    page.get_by_label("Password").fill("demo")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Welcome")


@pytest.mark.parametrize("width", [1280, 390])
def test_demo_owner_copies_a_live_revision_on_a_platform_runtime(demo, live_server, page, width):
    page.set_viewport_size({"width": width, "height": 900})
    service = Service.objects.select_related("live_revision__runtime__team").get(
        slug="kb-assistant"
    )
    live = service.live_revision
    assert live.runtime.team.slug == "inference-platform"
    assert not live.runtime.team.members.filter(username="owner").exists()
    log_in_as_demo_owner(page, live_server)

    page.goto(f"{live_server.url}/services/kb-assistant/{live.label}/")
    page.get_by_role("button", name="New revision from this one").click()

    expect(page).to_have_url(
        re.compile(rf"/services/kb-assistant/revisions/new\?from={live.number}$")
    )
    runtime = page.get_by_label("Runtime")
    expect(runtime).to_have_value(str(live.runtime_id))
    expect(runtime.locator("option:checked")).to_contain_text("team inference-platform")
    expect(page.get_by_label("Model asset")).to_have_value(str(live.model_asset_id))
    expect(page.locator(".errorlist")).to_have_count(0)

    page.get_by_label("Gateway policy version").fill("gw-browser-1")
    page.get_by_role("button", name="Create revision").click()

    new = Revision.objects.filter(service=service).order_by("-number").first()
    expect(page).to_have_url(f"{live_server.url}/services/kb-assistant/{new.label}/")
    assert (new.runtime_id, new.model_asset_id, new.based_on_id) == (
        live.runtime_id,
        live.model_asset_id,
        live.pk,
    )
    assert new.gateway_policy_version == "gw-browser-1"


def test_every_demo_service_offers_the_platform_runtimes_to_the_owner(demo, live_server, page):
    log_in_as_demo_owner(page, live_server)
    platform = set(
        Revision.objects.filter(runtime__team__slug="inference-platform").values_list(
            "runtime_id", flat=True
        )
    )
    for slug in Service.objects.order_by("slug").values_list("slug", flat=True):
        page.goto(f"{live_server.url}/services/{slug}/revisions/new")
        offered = set(
            int(v)
            for v in page.get_by_label("Runtime")
            .locator("option")
            .evaluate_all("options => options.map(o => o.value).filter(Boolean)")
        )
        assert platform <= offered, slug
