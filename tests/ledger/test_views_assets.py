"""Model asset pages and forms, through the client."""

from __future__ import annotations

import datetime as dt

import pytest

from ledger import services
from ledger.models import Event, ModelAsset, Service
from tests.ledger.factories import (
    LicenseFactory,
    ModelAssetFactory,
    RevisionFactory,
    ServiceFactory,
    TeamFactory,
    digest,
)

BAD_DIGEST = "sha256:abc123"
# The database rule's own message (ledger_modelasset_derivation_matches_parent).
DERIVATION_MISMATCH = (
    "Derivation and Derived from must agree: a base model is derived from nothing; a "
    "quantized, merged or fine-tuned one names the asset it was derived from."
)


def asset_data(team, license_, **overrides):
    data = {
        "name": "Qwen2.5-7B-Instruct-AWQ",
        "revision": "a1b2c3d",
        "team": team.pk,
        "family": "qwen2.5",
        "source_repository": "Qwen/Qwen2.5-7B-Instruct-AWQ",
        "derived_from": "",
        "derivation": "base",
        "quantization": "int4-awq",
        "license": license_.pk,
        "weights_digest": digest("weights"),
        "tokenizer_id": "",
        "tokenizer_digest": digest("tokenizer"),
        "chat_template_digest": digest("template"),
        "generation_config_digest": digest("genconfig"),
        "config_digest": digest("config"),
        "model_card_url": "",
    }
    data.update(overrides)
    return data


@pytest.fixture
def apache(db):
    return LicenseFactory()


# ---------------------------------------------------------------- list


def test_asset_list_filters_in_the_url_and_pages(client, auditor, team):
    for n in range(26):
        ModelAssetFactory(team=team, name=f"Model-{n:02d}", quantization="int4-awq")
    ModelAssetFactory(team=team, name="Other-bf16", quantization="bf16")
    client.force_login(auditor)

    first = client.get("/assets/", {"quantization": "int4-awq"})
    searched = client.get("/assets/", {"q": "other"})

    assert first.context["page"].paginator.count == 26
    assert len(first.context["page"].object_list) == 25
    assert 'href="?quantization=int4-awq&amp;page=2"' in first.content.decode()
    assert [a.name for a in searched.context["page"].object_list] == ["Other-bf16"]


def test_asset_list_empty_state_names_the_next_step(client, owner, team):
    client.force_login(owner)

    assert "Register the first one" in client.get("/assets/").content.decode()
    nothing = client.get("/assets/", {"q": "zzz"}).content.decode()
    assert "No asset matches these filters" in nothing


def test_asset_list_htmx_filtering_returns_the_results_only(client, owner, team):
    ModelAssetFactory(team=team, name="Qwen")
    client.force_login(owner)

    response = client.get("/assets/", {"q": "qwen", "team": ""}, HTTP_HX_REQUEST="true")

    assert "<html" not in response.content.decode()
    assert response["HX-Push-Url"] == "/assets/?q=qwen"


# ---------------------------------------------------------------- detail


def test_asset_page_shows_lineage_license_digests_and_lifecycle(client, sre, team):
    base = ModelAssetFactory(team=team, name="Qwen2.5-7B", quantization="bf16")
    merged = ModelAssetFactory(
        team=team, name="Qwen2.5-7B-merged", derived_from=base, derivation="merged"
    )
    awq = ModelAssetFactory(
        team=team,
        name="Qwen2.5-7B-merged-AWQ",
        derived_from=merged,
        derivation="quantized",
        quantization="int4-awq",
    )
    client.force_login(sre)

    response = client.get(f"/assets/{merged.pk}/")

    assert response.status_code == 200
    assert [a.name for a in response.context["lineage"]] == ["Qwen2.5-7B", "Qwen2.5-7B-merged"]
    assert list(response.context["derivatives"]) == [awq]
    page = response.content.decode()
    assert "Apache-2.0" in page
    assert "license pending" in page
    assert merged.weights_digest in page
    assert merged.chat_template_digest in page
    assert merged.generation_config_digest in page
    assert '<span class="badge ok">active</span>' in page
    assert "No revision uses it yet" in page


def test_asset_page_shows_revisions_using_it_and_why_it_is_locked(client, sre, team):
    service = ServiceFactory(team=team, slug="kb-assistant")
    revision = RevisionFactory(service=service)
    services.set_live_revision(service, revision, actor=None)
    client.force_login(sre)

    response = client.get(f"/assets/{revision.model_asset.pk}/")

    page = response.content.decode()
    assert "kb-assistant r1" in page
    assert '<span class="badge ok">live</span>' in page
    assert "kb-assistant r1 has served with it" in page


def test_gated_license_without_acceptance_says_so(client, sre, team):
    gated = LicenseFactory(
        spdx_id="LicenseRef-Llama-3.1-Community", name="Llama", kind="acceptable_use", gated=True
    )
    asset = ModelAssetFactory(team=team, license=gated)
    client.force_login(sre)

    page = client.get(f"/assets/{asset.pk}/").content.decode()

    assert '<span class="badge warn">gated</span>' in page
    assert '<span class="badge bad">not accepted</span>' in page


# ---------------------------------------------------------------- register


def test_owner_registers_an_asset_and_the_ledger_records_it(client, owner, team, apache):
    client.force_login(owner)

    response = client.post("/assets/new", asset_data(team, apache))

    asset = ModelAsset.objects.get(name="Qwen2.5-7B-Instruct-AWQ")
    assert response.status_code == 302
    assert response["Location"] == f"/assets/{asset.pk}/"
    assert asset.team == team
    event = Event.objects.get(action="model_asset.registered")
    assert event.actor == owner
    assert event.payload_data["after"]["weights_digest"] == digest("weights")


def test_a_bad_digest_is_refused_beside_its_field_and_nothing_is_written(
    client, owner, team, apache
):
    client.force_login(owner)

    response = client.post("/assets/new", asset_data(team, apache, weights_digest=BAD_DIGEST))

    page = response.content.decode()
    assert response.status_code == 200
    assert response.context["form"].errors["weights_digest"]
    assert "It has 6 hexadecimal characters; a sha256 digest has 64." in page
    assert '<a href="#id_weights_digest">Weights digest</a>' in page
    assert f'value="{BAD_DIGEST}"' in page
    assert not ModelAsset.objects.exists()
    assert not Event.objects.exists()


def test_inline_validation_of_a_digest_answers_with_that_field_only(client, owner, team, apache):
    client.force_login(owner)

    response = client.post(
        "/assets/new/validate",
        asset_data(team, apache, weights_digest=BAD_DIGEST),
        HTTP_HX_REQUEST="true",
        HTTP_HX_TRIGGER_NAME="weights_digest",
    )

    body = response.content.decode()
    assert response.status_code == 200
    assert body.strip().startswith('<div class="field has-error" id="field-weights_digest">')
    assert "a sha256 digest has 64" in body
    assert 'aria-invalid="true"' in body
    assert "<html" not in body
    # The swapped-in field validates again as the user goes on typing.
    assert 'hx-post="/assets/new/validate"' in body
    assert 'hx-target="#field-weights_digest"' in body
    assert not ModelAsset.objects.exists()


def test_inline_validation_of_a_good_digest_clears_the_error(client, owner, team, apache):
    client.force_login(owner)

    response = client.post(
        "/assets/new/validate",
        asset_data(team, apache),
        HTTP_HX_REQUEST="true",
        HTTP_HX_TRIGGER_NAME="weights_digest",
    )

    assert '<div class="field" id="field-weights_digest">' in response.content.decode()


@pytest.mark.parametrize(
    "derivation",
    [
        pytest.param({"derivation": "base"}, id="base-with-a-parent"),
        pytest.param({"derivation": "quantized", "derived_from": ""}, id="derived-from-nothing"),
    ],
)
def test_derivation_must_match_the_parent(client, owner, team, apache, derivation):
    base = ModelAssetFactory(team=team)
    events_before = Event.objects.count()
    client.force_login(owner)
    data = asset_data(team, apache, derived_from=base.pk)
    data.update(derivation)

    response = client.post("/assets/new", data)

    assert response.status_code == 200
    assert response.context["form"].non_field_errors() == [DERIVATION_MISMATCH]
    assert f"<li>{DERIVATION_MISMATCH}</li>" in response.content.decode()
    assert ModelAsset.objects.count() == 1
    assert Event.objects.count() == events_before


def test_license_is_a_select_of_known_licenses(client, owner, team, apache):
    client.force_login(owner)

    page = client.get("/assets/new").content.decode()

    assert '<select name="license"' in page
    assert "Apache-2.0 (permissive)" in page


def test_new_asset_from_this_one_prefills_all_but_the_revision(client, owner, team):
    source = ModelAssetFactory(team=team, name="Qwen", family="qwen2.5", revision="v1")
    client.force_login(owner)

    form = client.get(f"/assets/new?from={source.pk}").context["form"]

    assert form.initial["name"] == "Qwen"
    assert form.initial["weights_digest"] == source.weights_digest
    assert form.initial["team"] == team.pk
    assert "revision" not in form.initial


# ---------------------------------------------------------------- edit


def test_owner_edits_an_unserved_asset(client, owner, team, apache):
    asset = ModelAssetFactory(team=team, family="qwen2")
    client.force_login(owner)
    data = asset_data(team, apache, name=asset.name, revision=asset.revision, family="qwen2.5")

    response = client.post(f"/assets/{asset.pk}/edit", data)

    assert response.status_code == 302
    asset.refresh_from_db()
    assert asset.family == "qwen2.5"
    event = Event.objects.get(action="model_asset.updated")
    assert event.payload_data["before"]["family"] == "qwen2"
    assert event.payload_data["after"]["family"] == "qwen2.5"


def test_locked_asset_edit_says_why_and_offers_a_new_one(client, owner, team):
    service = ServiceFactory(team=team, slug="kb-assistant")
    revision = RevisionFactory(service=service)
    services.set_live_revision(service, revision, actor=None)
    asset = revision.model_asset
    client.force_login(owner)

    response = client.get(f"/assets/{asset.pk}/edit")

    page = response.content.decode()
    assert "This can no longer change: kb-assistant r1 has served with it." in page
    assert f'href="/assets/new?from={asset.pk}"' in page
    assert list(response.context["form"].fields) == ["model_card_url"]


def test_locked_asset_content_cannot_be_changed_by_posting_it(client, owner, team, apache):
    service = ServiceFactory(team=team, slug="kb-assistant")
    revision = RevisionFactory(service=service)
    services.set_live_revision(service, revision, actor=None)
    asset = revision.model_asset
    client.force_login(owner)

    client.post(
        f"/assets/{asset.pk}/edit",
        {"weights_digest": digest("other"), "model_card_url": "https://example.com/card"},
    )

    asset.refresh_from_db()
    assert asset.weights_digest != digest("other")
    assert asset.model_card_url == "https://example.com/card"


# ---------------------------------------------------------------- lifecycle


def test_deprecate_asks_for_confirmation_and_says_what_will_happen(client, owner, team):
    service = ServiceFactory(team=team, slug="kb-assistant")
    revision = RevisionFactory(service=service)
    services.set_live_revision(service, revision, actor=None)
    client.force_login(owner)

    response = client.get(f"/assets/{revision.model_asset.pk}/deprecate")

    page = response.content.decode()
    assert "What will happen" in page
    assert "new revisions may still use it" in page
    assert "kb-assistant" in page
    revision.model_asset.refresh_from_db()
    assert revision.model_asset.lifecycle == "active"


def test_deprecate_then_retire(client, owner, team):
    asset = ModelAssetFactory(team=team)
    client.force_login(owner)

    deprecated = client.post(f"/assets/{asset.pk}/deprecate", {"on": "2026-01-15"})
    asset.refresh_from_db()
    assert deprecated.status_code == 302
    assert asset.lifecycle == "deprecated"
    assert asset.deprecated_on == dt.date(2026, 1, 15)

    retired = client.post(f"/assets/{asset.pk}/retire", {"on": ""})
    asset.refresh_from_db()
    assert retired.status_code == 302
    assert asset.lifecycle == "retired"
    assert [e.action for e in Event.objects.order_by("sequence")][-2:] == [
        "model_asset.deprecated",
        "model_asset.retired",
    ]


def test_a_retired_asset_cannot_be_deprecated_again(client, owner, team):
    asset = ModelAssetFactory(team=team)
    services.retire_asset(asset, actor=None)
    client.force_login(owner)
    before = Event.objects.count()

    response = client.post(f"/assets/{asset.pk}/deprecate", {})

    assert response.status_code == 200
    assert "cannot change lifecycle again" in response.content.decode()
    asset.refresh_from_db()
    assert asset.lifecycle == "retired"
    assert Event.objects.count() == before


def test_owner_of_another_team_cannot_retire(client, team):
    from tests.factories import UserFactory

    other_owner = UserFactory(username="oscar", roles=["model_owner"])
    TeamFactory(slug="other", members=[other_owner])
    asset = ModelAssetFactory(team=team)
    client.force_login(other_owner)

    assert client.post(f"/assets/{asset.pk}/retire", {}).status_code == 403
    asset.refresh_from_db()
    assert asset.lifecycle == "active"


def test_service_count_is_untouched_by_asset_pages(client, sre, team):
    # Reading pages never writes: no event, no row.
    asset = ModelAssetFactory(team=team)
    before = Event.objects.count()
    client.force_login(sre)

    client.get(f"/assets/{asset.pk}/")
    client.get("/assets/")

    assert Event.objects.count() == before
    assert Service.objects.count() == 0
