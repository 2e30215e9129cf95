"""Revision pages, the revision form and capability declarations, through the client."""

from __future__ import annotations

import pytest

from ledger import services
from ledger.models import Capability, Event, Revision, Service
from tests.ledger.factories import (
    ModelAssetFactory,
    RevisionFactory,
    RuntimeFactory,
    ServiceFactory,
)


@pytest.fixture
def kb(team):
    """kb-assistant r1 (live) on an asset and a vLLM runtime with max_model_len 32768."""
    service = ServiceFactory(team=team, slug="kb-assistant")
    revision = RevisionFactory(service=service)
    services.set_live_revision(service, revision, actor=None)
    return Service.objects.get(pk=service.pk)


def revision_data(revision, **overrides):
    data = {
        "model_asset": revision.model_asset_id,
        "runtime": revision.runtime_id,
        "context_limit": "32768",
        "gateway_policy_version": "gw-2",
        "notes": "",
        "based_on": "",
    }
    data.update(overrides)
    return data


def test_revision_page_shows_parts_fingerprint_components_and_lock(client, sre, kb):
    revision = kb.live_revision
    client.force_login(sre)

    response = client.get("/services/kb-assistant/r1/")

    page = response.content.decode()
    assert response.status_code == 200
    assert revision.fingerprint in page
    labels = [row["label"] for row in response.context["components"]]
    assert labels == [
        "Weights digest",
        "Tokenizer digest",
        "Chat template digest",
        "Generation config digest",
        "Image digest",
        "Launch parameters",
        "Context limit (tokens)",
    ]
    assert revision.model_asset.chat_template_digest in page
    assert "r1 has served live traffic" in page
    assert not response.context["fingerprint_stale"]
    assert "No other revision has this fingerprint" in page


def test_revision_page_lists_revisions_with_the_same_fingerprint(client, sre, kb, team):
    r1 = kb.live_revision
    other = ServiceFactory(team=team, slug="kb-shadow")
    RevisionFactory(service=other, model_asset=r1.model_asset, runtime=r1.runtime)
    client.force_login(sre)

    page = client.get("/services/kb-assistant/r1/").content.decode()

    assert '<span class="badge info">same thing</span>' in page
    assert 'href="/services/kb-shadow/r1/"' in page


def test_revision_page_flags_a_fingerprint_that_no_longer_matches_its_parts(client, owner, team):
    from ledger.models import Runtime

    service = ServiceFactory(team=team, slug="kb-assistant")
    revision = RevisionFactory(service=service)
    # A row changed behind the application's back (the verbs recompute fingerprints).
    Runtime.objects.filter(pk=revision.runtime_id).update(
        launch_parameters={"max_model_len": 16384}
    )
    client.force_login(owner)

    response = client.get("/services/kb-assistant/r1/")

    assert response.context["fingerprint_stale"]
    assert '<span class="badge warn">stale</span>' in response.content.decode()


def test_new_revision_from_this_one_opens_the_prefilled_form(client, owner, kb):
    client.force_login(owner)

    response = client.post("/services/kb-assistant/r1/new-revision")

    assert response.status_code == 302
    assert response["Location"] == "/services/kb-assistant/revisions/new?from=1"
    form = client.get(response["Location"]).context["form"]
    assert form.initial["model_asset"] == kb.live_revision.model_asset_id
    assert form.initial["based_on"] == kb.live_revision.pk
    assert form.initial["context_limit"] == 32768
    assert Revision.objects.count() == 1


def test_owner_creates_a_revision_based_on_another(client, owner, kb):
    r1 = kb.live_revision
    client.force_login(owner)

    response = client.post(
        "/services/kb-assistant/revisions/new", revision_data(r1, based_on=r1.pk)
    )

    assert response.status_code == 302
    assert response["Location"] == "/services/kb-assistant/r2/"
    r2 = Revision.objects.get(service=kb, number=2)
    assert r2.based_on == r1
    assert r2.created_by == owner
    assert r2.fingerprint == r1.fingerprint
    assert Event.objects.filter(action="revision.created", actor=owner).count() == 1


def test_revision_form_refuses_a_context_limit_below_the_runtime_flag(client, owner, kb):
    client.force_login(owner)

    response = client.post(
        "/services/kb-assistant/revisions/new",
        revision_data(kb.live_revision, context_limit="4096"),
    )

    assert response.status_code == 200
    assert "max_model_len 32768 exceeds the revision&#x27;s declared context limit of 4096" in (
        response.content.decode()
    )
    assert Revision.objects.count() == 1


def test_revision_inline_validation_checks_the_context_limit(client, owner, kb):
    client.force_login(owner)

    response = client.post(
        "/services/kb-assistant/revisions/new/validate",
        revision_data(kb.live_revision, context_limit="4096"),
        HTTP_HX_REQUEST="true",
        HTTP_HX_TRIGGER_NAME="context_limit",
    )

    body = response.content.decode()
    assert body.strip().startswith('<div class="field has-error" id="field-context_limit">')
    assert "exceeds the revision" in body


def test_revision_form_offers_the_teams_assets_and_every_runtime(client, owner, kb):
    from tests.ledger.factories import TeamFactory

    other = TeamFactory(slug="other")
    foreign_asset = ModelAssetFactory(team=other)
    RuntimeFactory(team=other, name="platform-runtime", gpu_model="H100-80GB", gpu_count=2)
    retired = ModelAssetFactory(team=kb.team, name="Retired-Model")
    services.retire_asset(retired, actor=None)
    client.force_login(owner)

    response = client.get("/services/kb-assistant/revisions/new")

    form = response.context["form"]
    assets = list(form.fields["model_asset"].queryset)
    assert kb.live_revision.model_asset in assets
    assert foreign_asset not in assets
    assert retired not in assets
    # A runtime's team owns editing it, not using it.
    assert "platform-runtime" in [r.name for r in form.fields["runtime"].queryset]
    assert "platform-runtime (vLLM 0.6.3, 2 x H100-80GB; team other)" in response.content.decode()


def test_a_revision_on_another_teams_runtime_is_created(client, owner, kb):
    from tests.ledger.factories import TeamFactory

    platform = RuntimeFactory(team=TeamFactory(slug="inference-platform"), name="platform-vllm")
    client.force_login(owner)

    response = client.post(
        "/services/kb-assistant/revisions/new",
        revision_data(kb.live_revision, runtime=platform.pk),
    )

    assert response.status_code == 302, response.context["form"].errors
    assert Revision.objects.get(service=kb, number=2).runtime == platform


def test_new_revision_from_one_on_a_platform_runtime_keeps_the_runtime(client, owner, team):
    from tests.ledger.factories import TeamFactory

    service = ServiceFactory(team=team, slug="kb-assistant")
    platform = RuntimeFactory(team=TeamFactory(slug="inference-platform"), name="platform-vllm")
    r1 = RevisionFactory(service=service, runtime=platform)
    client.force_login(owner)

    form = client.get("/services/kb-assistant/revisions/new?from=1").context["form"]

    assert form.initial["runtime"] == platform.pk
    assert form["runtime"].value() == platform.pk
    assert platform in form.fields["runtime"].queryset
    assert form.field_warnings == {}
    response = client.post(
        "/services/kb-assistant/revisions/new",
        {name: form[name].value() for name in form.fields} | {"gateway_policy_version": "gw-2"},
    )
    assert response.status_code == 302
    r2 = Revision.objects.get(service=service, number=2)
    assert (r2.runtime, r2.model_asset, r2.based_on) == (platform, r1.model_asset, r1)


def test_new_revision_from_one_with_a_retired_asset_says_why_it_is_not_offered(client, owner, kb):
    r1 = kb.live_revision
    services.retire_asset(r1.model_asset, actor=None)
    client.force_login(owner)

    response = client.get("/services/kb-assistant/revisions/new?from=1")

    body = response.content.decode()
    assert f"r1&#x27;s model asset {r1.model_asset} is not offered" in body
    assert "a retired asset cannot go into a new revision" in body
    # The runtime and the rest are still copied.
    assert response.context["form"]["runtime"].value() == r1.runtime_id


def test_production_revision_refuses_an_unpinned_runtime(client, owner, team):
    ServiceFactory(team=team, slug="prod-svc", tier="production")
    asset = ModelAssetFactory(team=team)
    runtime = RuntimeFactory(team=team, image="registry.example.com/vllm-openai:v0.6.3")
    client.force_login(owner)

    response = client.post(
        "/services/prod-svc/revisions/new",
        {
            "model_asset": asset.pk,
            "runtime": runtime.pk,
            "context_limit": "32768",
            "gateway_policy_version": "gw-1",
        },
    )

    assert "Production services need an image pinned by digest" in response.content.decode()
    assert not Revision.objects.exists()


def test_owner_declares_a_capability(client, owner, kb):
    client.force_login(owner)

    response = client.post(
        "/services/kb-assistant/r1/capabilities/new", {"kind": "streaming", "value": '"sse"'}
    )

    assert response.status_code == 302
    capability = Capability.objects.get(revision=kb.live_revision)
    assert capability.value == "sse"
    assert capability.status == "declared"
    assert Event.objects.filter(action="capability.declared", actor=owner).exists()


def test_capability_value_is_checked_against_its_kind(client, owner, kb):
    client.force_login(owner)

    response = client.post(
        "/services/kb-assistant/r1/capabilities/new/validate",
        {"kind": "streaming", "value": '"carrier-pigeon"'},
        HTTP_HX_REQUEST="true",
        HTTP_HX_TRIGGER_NAME="value",
    )

    body = response.content.decode()
    assert 'id="field-value"' in body
    assert "Example: &quot;sse&quot;" in body
    assert not Capability.objects.exists()


def test_capability_form_lists_an_example_for_each_kind(client, owner, kb):
    client.force_login(owner)

    page = client.get("/services/kb-assistant/r1/capabilities/new").content.decode()

    assert "What each kind of capability takes" in page
    assert "<code>[&quot;json_schema&quot;, &quot;regex&quot;]</code>" in page


def test_changing_a_capability_of_a_served_revision_is_refused_with_the_reason(client, owner, kb):
    services.declare_capability(kb.live_revision, actor=None, kind="streaming", value="sse")
    client.force_login(owner)

    response = client.post(
        "/services/kb-assistant/r1/capabilities/new", {"kind": "streaming", "value": '"grpc"'}
    )

    assert response.status_code == 200
    assert "r1 has served live traffic" in response.content.decode()
    assert Capability.objects.get().value == "sse"


def test_declare_again_prefills_the_current_value(client, owner, kb):
    services.declare_capability(kb.live_revision, actor=None, kind="max_concurrency", value=64)
    client.force_login(owner)

    form = client.get("/services/kb-assistant/r1/capabilities/new?kind=max_concurrency").context[
        "form"
    ]

    assert form.initial == {"kind": "max_concurrency", "value": 64}


def test_unknown_revision_is_404(client, sre, kb):
    client.force_login(sre)

    assert client.get("/services/kb-assistant/r9/").status_code == 404
