"""The release form picks replay sample sets from those that exist, each with its
latest version, instead of taking typed names (issue 27 item 8b)."""

from __future__ import annotations

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from releases.models import Release
from tests.factories import PASSWORD
from tests.releases.factories import build_world
from tests.replay.factories import SampleSetFactory

pytestmark = pytest.mark.browser


def log_in(page, live_server, user):
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill(user.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Welcome")


def test_the_release_form_offers_the_sample_sets_with_their_latest_versions(
    live_server, page, owner, team
):
    world = build_world(team)
    SampleSetFactory(name=world.sample_set.name, version=2)
    SampleSetFactory(name="json-contracts", version=3)
    log_in(page, live_server, owner)
    page.goto(f"{live_server.url}/services/{world.service.slug}/releases/new/")

    picker = page.locator("#id_required_sample_sets")
    options = picker.locator("label")
    # Those already replayed on this service first, then the rest by name.
    expect(options).to_have_text(
        [
            f"{world.sample_set.name} (v2), replayed on this service",
            f"{world.verification_set.name} (v1), replayed on this service",
            "json-contracts (v3)",
        ]
    )
    verification_names = page.locator("datalist#sample-set-names option")
    expect(verification_names).to_have_count(3)
    expect(page.get_by_label("Verification sample set")).to_have_attribute(
        "list", "sample-set-names"
    )

    page.get_by_label("To revision").select_option(str(world.candidate.pk))
    page.get_by_label("Change kind").select_option("model_upgrade")
    page.get_by_label("Summary").fill("Move to the fine-tune")
    picker.get_by_label(f"{world.sample_set.name} (v2), replayed on this service").check()
    picker.get_by_label("json-contracts (v3)").check()
    page.get_by_label("Verification sample set").fill(world.verification_set.name)
    page.get_by_role("button", name="Save draft").click()

    release = Release.objects.get()
    expect(page).to_have_url(f"{live_server.url}/releases/{release.pk}/edit/")
    assert release.required_sample_sets == [world.sample_set.name, "json-contracts"]
    expect(picker.get_by_label("json-contracts (v3)")).to_be_checked()


def test_a_name_no_set_has_is_refused_beside_the_field(client, owner, team):
    world = build_world(team)
    client.force_login(owner)

    response = client.post(
        reverse("releases:release_new", args=[world.service.slug]),
        {
            "to_revision": str(world.candidate.pk),
            "change_kind": "model_upgrade",
            "summary": "Move to the fine-tune",
            "required_sample_sets": [world.sample_set.name, "no-such-set"],
            "path": "normal",
        },
    )

    assert response.status_code == 400
    assert response.context["form"].errors["required_sample_sets"] == [
        "No sample set named no-such-set."
    ]
    assert not Release.objects.exists()
