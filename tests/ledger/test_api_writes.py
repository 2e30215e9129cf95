"""Writing the registry over the REST API: what is recorded, and refusals that name the field."""

from __future__ import annotations

import pytest

from ledger import services
from ledger.models import Capability, Event, ModelAsset, Revision, Service
from tests.ledger.factories import (
    LicenseFactory,
    ModelAssetFactory,
    RevisionFactory,
    RuntimeFactory,
    ServiceFactory,
    digest,
)


@pytest.fixture
def api(client, owner, team):
    """The owner of kb-team, signed in; JSON in and out."""
    client.force_login(owner)
    LicenseFactory()

    class Api:
        def post(self, url, data):
            return client.post(url, data, content_type="application/json")

        def patch(self, url, data):
            return client.patch(url, data, content_type="application/json")

    return Api()


def _asset(**overrides):
    return {
        "name": "Qwen2.5-7B-Instruct",
        "revision": "a09a3545",
        "team": "kb-team",
        "family": "qwen2.5",
        "source_repository": "Qwen/Qwen2.5-7B-Instruct",
        "weights_digest": digest("weights"),
        "license": "Apache-2.0",
        "tokenizer_digest": digest("tokenizer"),
        "chat_template_digest": digest("template"),
        "generation_config_digest": digest("genconfig"),
        "config_digest": digest("config"),
        **overrides,
    }


def _last_event() -> Event:
    return Event.objects.order_by("-sequence").first()


# ---------------------------------------------------------------- successful writes


def test_owner_registers_a_service_with_task_types(api):
    response = api.post(
        "/api/services/",
        {
            "slug": "kb-assistant",
            "name": "Knowledge base assistant",
            "team": "kb-team",
            "tier": "production",
            "exposure": "external",
            "task_types": ["chat", "rag"],
            "tenants": ["support", "sales"],
            "slo_ttft_p95_ms": 800,
            "slo_ttft_p99_ms": 1500,
        },
    )

    assert response.status_code == 201, response.content
    assert response.json()["task_types"] == ["chat", "rag"]
    assert response.json()["live_revision"] is None
    service = Service.objects.get(slug="kb-assistant")
    assert service.tenants == ["support", "sales"]
    event = _last_event()
    assert (event.action, event.actor_label) == ("service.created", "olivia")
    assert event.payload_data["after"]["task_types"] == ["chat", "rag"]


def test_patching_a_service_records_before_and_after(api, team):
    ServiceFactory(slug="kb-assistant", team=team)

    response = api.patch("/api/services/kb-assistant/", {"tier": "production"})

    assert response.status_code == 200
    assert response.json()["tier"] == "production"
    event = _last_event()
    assert event.action == "service.updated"
    assert event.payload_data == {"before": {"tier": "internal"}, "after": {"tier": "production"}}


def test_patching_a_service_with_its_own_values_appends_nothing(api, team):
    ServiceFactory(slug="kb-assistant", team=team)
    before = Event.objects.count()

    response = api.patch("/api/services/kb-assistant/", {"tier": "internal"})

    assert response.status_code == 200
    assert Event.objects.count() == before


def test_owner_registers_an_asset_derived_from_another(api, team):
    base = ModelAssetFactory(team=team)

    response = api.post(
        "/api/assets/",
        _asset(
            name="Qwen2.5-7B-Instruct-AWQ",
            weights_digest=digest("awq"),
            quantization="int4-awq",
            derived_from=base.pk,
            derivation="quantized",
        ),
    )

    assert response.status_code == 201, response.content
    assert response.json()["license_approval"] == "pending"
    assert ModelAsset.objects.get(name="Qwen2.5-7B-Instruct-AWQ").derived_from == base
    assert _last_event().action == "model_asset.registered"


def test_owner_makes_a_revision_and_gets_its_fingerprint(api, team):
    service = ServiceFactory(slug="kb-assistant", team=team)
    asset = ModelAssetFactory(team=team)
    runtime = RuntimeFactory(team=team)

    response = api.post(
        "/api/revisions/",
        {
            "service": "kb-assistant",
            "model_asset": asset.pk,
            "runtime": runtime.name,
            "context_limit": 32768,
            "gateway_policy_version": "gw-7",
        },
    )

    body = response.json()
    assert response.status_code == 201, body
    revision = Revision.objects.get(pk=body["id"])
    assert body["label"] == "r1"
    assert body["fingerprint"] == revision.fingerprint
    assert body["created_by"] == "olivia"
    assert body["locked"] is False
    assert revision.service == service


def test_new_revision_from_a_locked_one_copies_its_parts_with_overrides(api, team):
    live = RevisionFactory(service__team=team)
    services.set_live_revision(live.service, live, actor=None)

    response = api.post(f"/api/revisions/{live.pk}/new-revision/", {"context_limit": 65536})

    body = response.json()
    assert response.status_code == 201, body
    assert body["based_on"] == live.pk
    assert body["label"] == "r2"
    assert body["model_asset"] == live.model_asset_id
    assert body["context_limit"] == 65536
    assert body["fingerprint"] != live.fingerprint
    assert _last_event().action == "revision.created"


def test_redeclaring_a_capability_clears_its_verification(api, team):
    revision = RevisionFactory(service__team=team)
    capability = services.declare_capability(revision, actor=None, kind="streaming", value="sse")
    services.record_capability_check(capability, actor=None, passed=True, evidence={"ok": 1})

    response = api.patch(f"/api/capabilities/{capability.pk}/", {"value": "websocket"})

    assert response.status_code == 200
    assert response.json()["status"] == "declared"
    assert response.json()["current"] is False
    assert Capability.objects.get(pk=capability.pk).verified_at is None


def test_owner_deprecates_and_retires_an_asset(api, team):
    asset = ModelAssetFactory(team=team)

    deprecated = api.post(f"/api/assets/{asset.pk}/deprecate/", {"on": "2025-06-01"})
    retired = api.post(f"/api/assets/{asset.pk}/retire/", {})

    assert deprecated.json()["lifecycle"] == "deprecated"
    assert deprecated.json()["deprecated_on"] == "2025-06-01"
    assert retired.json()["lifecycle"] == "retired"
    assert retired.json()["deprecated_on"] == "2025-06-01"
    assert [e.action for e in Event.objects.order_by("-sequence")[:2]] == [
        "model_asset.retired",
        "model_asset.deprecated",
    ]


def test_deprecating_a_retired_asset_is_refused_and_names_the_field(api, team):
    asset = ModelAssetFactory(team=team)
    api.post(f"/api/assets/{asset.pk}/retire/", {"on": "2025-06-01"})
    before = Event.objects.count()

    response = api.post(f"/api/assets/{asset.pk}/deprecate/", {})

    assert response.status_code == 400
    assert "cannot change lifecycle again" in response.json()["lifecycle"][0]
    assert ModelAsset.objects.get(pk=asset.pk).lifecycle == "retired"
    assert Event.objects.count() == before


# ---------------------------------------------------------------- refusals that name the field


def test_a_bad_weights_digest_is_refused_naming_the_field(api):
    before = Event.objects.count()

    response = api.post("/api/assets/", _asset(weights_digest="sha256:ABC123"))

    assert response.status_code == 400
    (message,) = response.json()["weights_digest"]
    assert "Expected 'sha256:' followed by 64 lowercase hexadecimal characters" in message
    assert "It has 6 hexadecimal characters; a sha256 digest has 64." in message
    assert not ModelAsset.objects.exists()
    assert Event.objects.count() == before


def test_a_derived_asset_must_say_how_it_was_derived(api, team):
    base = ModelAssetFactory(team=team)

    response = api.post("/api/assets/", _asset(derived_from=base.pk, derivation="base"))

    assert response.status_code == 400
    assert "quantized, merged or fine-tuned" in response.json()["derivation"][0]


def test_a_derived_asset_must_name_what_it_was_derived_from(api):
    before = Event.objects.count()

    response = api.post("/api/assets/", _asset(derivation="quantized"))

    assert response.status_code == 400
    assert response.json() == {
        "non_field_errors": [
            "Derivation and Derived from must agree: a base model is derived from nothing; "
            "a quantized, merged or fine-tuned one names the asset it was derived from."
        ]
    }
    assert not ModelAsset.objects.exists()
    assert Event.objects.count() == before


def test_an_asset_cannot_be_derived_from_itself(api, team):
    asset = ModelAssetFactory(team=team)
    before = Event.objects.count()

    response = api.patch(
        f"/api/assets/{asset.pk}/", {"derived_from": asset.pk, "derivation": "quantized"}
    )

    assert response.status_code == 400
    assert response.json() == {
        "non_field_errors": [
            "Derived from cannot be the asset itself: name the asset it was quantized, "
            "merged or fine-tuned from, or make it a base model."
        ]
    }
    asset.refresh_from_db()
    assert (asset.derived_from, asset.derivation) == (None, "base")
    assert Event.objects.count() == before


def test_a_revision_of_no_context_is_refused(api, team):
    ServiceFactory(slug="kb-assistant", team=team)
    asset = ModelAssetFactory(team=team)
    runtime = RuntimeFactory(team=team)
    before = Event.objects.count()

    response = api.post(
        "/api/revisions/",
        {
            "service": "kb-assistant",
            "model_asset": asset.pk,
            "runtime": runtime.name,
            "context_limit": 0,
            "gateway_policy_version": "gw-7",
        },
    )

    assert response.status_code == 400
    assert response.json() == {
        "non_field_errors": [
            "Context limit must be at least 1 token: give the largest prompt + output this "
            "revision serves, e.g. 32768."
        ]
    }
    assert not Revision.objects.exists()
    assert Event.objects.count() == before


def test_an_unknown_spdx_id_is_refused_with_a_suggestion(client, security, db):
    client.force_login(security)

    response = client.post(
        "/api/licenses/",
        {"spdx_id": "apache-2", "name": "Apache", "kind": "permissive"},
        content_type="application/json",
    )

    assert response.status_code == 400
    assert "Did you mean 'Apache-2.0'?" in response.json()["spdx_id"][0]


def test_an_unclassified_license_must_say_its_kind(client, security, db):
    client.force_login(security)

    response = client.post(
        "/api/licenses/",
        {"spdx_id": "LicenseRef-Acme-Model", "name": "Acme model license"},
        content_type="application/json",
    )

    assert response.status_code == 400
    assert "non_commercial" in response.json()["kind"][0]


def test_a_tag_only_image_is_accepted_with_a_warning_outside_production(api):
    response = api.post(
        "/api/runtimes/",
        {
            "name": "vllm-latest",
            "team": "kb-team",
            "engine": "vllm",
            "engine_version": "0.6.3",
            "image": "registry.example.com/vllm-openai:v0.6.3",
        },
    )

    assert response.status_code == 201, response.content
    (warning,) = response.json()["warnings"]
    assert "not pinned by digest" in warning
    assert response.json()["image_digest"] is None


def test_a_tag_only_image_is_refused_for_a_production_revision_naming_runtime(api, team):
    ServiceFactory(slug="kb-assistant", team=team, tier=Service.Tier.PRODUCTION)
    asset = ModelAssetFactory(team=team)
    runtime = RuntimeFactory(team=team, image="registry.example.com/vllm-openai:v0.6.3")
    before = Event.objects.count()

    response = api.post(
        "/api/revisions/",
        {
            "service": "kb-assistant",
            "model_asset": asset.pk,
            "runtime": runtime.name,
            "context_limit": 32768,
            "gateway_policy_version": "gw-1",
        },
    )

    assert response.status_code == 400
    (message,) = response.json()["runtime"]
    assert "Production services need an image pinned by digest" in message
    assert "rolling back" in message
    assert not Revision.objects.exists()
    assert Event.objects.count() == before


def test_launch_parameters_must_be_a_json_object(api):
    response = api.post(
        "/api/runtimes/",
        {
            "name": "vllm-bad",
            "team": "kb-team",
            "engine": "vllm",
            "engine_version": "0.6.3",
            "image": f"registry.example.com/vllm@{digest('x')}",
            "launch_parameters": ["--max-model-len", "32768"],
        },
    )

    assert response.status_code == 400
    assert response.json()["launch_parameters"] == [
        'Expected a JSON object of engine flags such as {"max_model_len": 32768}; got list.'
    ]


def test_a_misspelt_engine_flag_is_refused_with_the_right_name(api):
    response = api.post(
        "/api/runtimes/",
        {
            "name": "vllm-typo",
            "team": "kb-team",
            "engine": "vllm",
            "engine_version": "0.6.3",
            "image": f"registry.example.com/vllm@{digest('x')}",
            "launch_parameters": {"max_model_length": 32768},
        },
    )

    assert response.status_code == 400
    assert "did you mean 'max_model_len'?" in response.json()["launch_parameters"][0]


def test_max_model_len_above_the_context_limit_is_refused_naming_context_limit(api, team):
    ServiceFactory(slug="kb-assistant", team=team)
    asset = ModelAssetFactory(team=team)
    runtime = RuntimeFactory(team=team, launch_parameters={"max_model_len": 131072})

    response = api.post(
        "/api/revisions/",
        {
            "service": "kb-assistant",
            "model_asset": asset.pk,
            "runtime": runtime.name,
            "context_limit": 32768,
            "gateway_policy_version": "gw-1",
        },
    )

    assert response.status_code == 400
    assert "exceeds the revision's declared context limit" in response.json()["context_limit"][0]


def test_a_retired_asset_cannot_go_into_a_new_revision(api, team):
    live = RevisionFactory(service__team=team)
    services.retire_asset(live.model_asset, actor=None)

    response = api.post(f"/api/revisions/{live.pk}/new-revision/", {})

    assert response.status_code == 400
    assert "a retired asset cannot go into a new revision" in response.json()["model_asset"][0]


def test_a_revision_may_run_on_another_teams_runtime_over_the_api(api, team):
    from tests.ledger.factories import TeamFactory

    live = RevisionFactory(service__team=team)
    platform = RuntimeFactory(team=TeamFactory(slug="inference-platform"), name="platform-vllm")

    response = api.post(f"/api/revisions/{live.pk}/new-revision/", {"runtime": "platform-vllm"})

    body = response.json()
    assert response.status_code == 201, body
    assert body["runtime"] == "platform-vllm"
    assert Revision.objects.get(pk=body["id"]).runtime == platform


def test_a_revision_may_not_serve_another_teams_asset_over_the_api(api, team):
    from tests.ledger.factories import TeamFactory

    live = RevisionFactory(service__team=team)
    foreign = ModelAssetFactory(team=TeamFactory(slug="other"))

    response = api.post(f"/api/revisions/{live.pk}/new-revision/", {"model_asset": foreign.pk})

    assert response.status_code == 400
    message = response.json()["model_asset"][0]
    assert "belongs to team 'other'" in message
    assert "serves assets of its own team 'kb-team'" in message


def test_patching_a_locked_revision_says_make_a_new_revision(api, team):
    live = RevisionFactory(service__team=team)
    services.set_live_revision(live.service, live, actor=None)
    before = Event.objects.count()

    response = api.patch(f"/api/revisions/{live.pk}/", {"context_limit": 16384})

    assert response.status_code == 400
    (message,) = response.json()["context_limit"]
    assert "has served live traffic" in message
    assert "Make a new revision instead." in message
    assert Revision.objects.get(pk=live.pk).context_limit == 32768
    assert Event.objects.count() == before


def test_notes_of_a_locked_revision_may_still_change(api, team):
    live = RevisionFactory(service__team=team)
    services.set_live_revision(live.service, live, actor=None)

    response = api.patch(f"/api/revisions/{live.pk}/", {"notes": "rollback target"})

    assert response.status_code == 200
    assert response.json()["notes"] == "rollback target"


def test_patching_a_locked_asset_names_the_field(api, team):
    live = RevisionFactory(service__team=team)
    services.set_live_revision(live.service, live, actor=None)

    response = api.patch(f"/api/assets/{live.model_asset_id}/", {"weights_digest": digest("other")})

    assert response.status_code == 400
    assert "Make a new revision instead." in response.json()["weights_digest"][0]


def test_a_revision_cannot_move_to_another_service(api, team):
    revision = RevisionFactory(service__team=team)
    ServiceFactory(slug="elsewhere", team=team)

    response = api.patch(f"/api/revisions/{revision.pk}/", {"service": "elsewhere"})

    assert response.status_code == 400
    assert response.json()["service"] == ["This field is set by the ledger itself."]


def test_a_capability_value_of_the_wrong_shape_shows_an_example(api, team):
    revision = RevisionFactory(service__team=team)

    response = api.post(
        "/api/capabilities/",
        {"revision": revision.pk, "kind": "structured_output", "value": "json"},
    )

    assert response.status_code == 400
    assert 'Example: ["json_schema", "regex"]' in response.json()["value"][0]


def test_a_capability_kind_is_fixed_once_declared(api, team):
    revision = RevisionFactory(service__team=team)
    capability = services.declare_capability(revision, actor=None, kind="streaming", value="sse")

    response = api.patch(f"/api/capabilities/{capability.pk}/", {"kind": "tool_calling"})

    assert response.status_code == 400
    assert "declare a new capability" in response.json()["kind"][0]


def test_a_duplicate_service_slug_is_refused_naming_slug(api, team):
    ServiceFactory(slug="kb-assistant", team=team)

    response = api.post(
        "/api/services/", {"slug": "kb-assistant", "name": "Again", "team": "kb-team"}
    )

    assert response.status_code == 400
    assert "slug" in response.json()


def test_slo_p99_below_p95_is_refused(api):
    before = Event.objects.count()

    response = api.post(
        "/api/services/",
        {
            "slug": "kb-assistant",
            "name": "KB",
            "team": "kb-team",
            "slo_ttft_p95_ms": 900,
            "slo_ttft_p99_ms": 500,
        },
    )

    assert response.status_code == 400
    assert response.json() == {
        "non_field_errors": [
            "SLO p99 TTFT (ms) must be at least the SLO p95 TTFT (ms): give a p99 equal to "
            "or above the p95 (e.g. p95 900, p99 1500), or leave one of them empty."
        ]
    }
    assert not Service.objects.exists()
    assert Event.objects.count() == before
