"""Who may write what over the REST API: each role by each write endpoint.

A refused write answers 401/403, appends no Event and leaves every row as it was.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from ledger import services
from ledger.models import Capability, Event, ModelAsset, Revision, Runtime, Service
from tests.factories import UserFactory
from tests.ledger.factories import (
    LicenseFactory,
    RevisionFactory,
    ServiceFactory,
    TeamFactory,
    digest,
)


@dataclass
class World:
    service: Service
    revision: Revision
    capability: Capability
    asset: ModelAsset
    runtime: Runtime


@pytest.fixture
def world(team):
    LicenseFactory()
    service = ServiceFactory(slug="kb-assistant", team=team)
    revision = RevisionFactory(service=service)
    capability = services.declare_capability(revision, actor=None, kind="streaming", value="sse")
    return World(service, revision, capability, revision.model_asset, revision.runtime)


@pytest.fixture
def other_owner(db):
    """A model owner, but of another team."""
    user = UserFactory(username="oscar", roles=["model_owner"])
    TeamFactory(slug="data-team", members=[user])
    return user


def _asset_payload() -> dict[str, Any]:
    return {
        "name": "Qwen2.5-14B-Instruct",
        "revision": "main",
        "team": "kb-team",
        "family": "qwen2.5",
        "source_repository": "Qwen/Qwen2.5-14B-Instruct",
        "weights_digest": digest("weights-14b"),
        "license": "Apache-2.0",
        "tokenizer_digest": digest("tokenizer-14b"),
        "chat_template_digest": digest("template-14b"),
        "generation_config_digest": digest("genconfig-14b"),
        "config_digest": digest("config-14b"),
    }


def _runtime_payload() -> dict[str, Any]:
    return {
        "name": "vllm-0-6-3-h100x2",
        "team": "kb-team",
        "engine": "vllm",
        "engine_version": "0.6.3",
        "image": f"registry.example.com/vllm-openai:v0.6.3@{digest('image')}",
        "launch_parameters": {"max_model_len": 32768, "tensor_parallel_size": 2},
        "gpu_model": "H100-80GB",
        "gpu_count": 2,
    }


# name: (method, url, payload, model whose rows must not change, success status)
WRITES: dict[str, Any] = {
    "create_service": lambda w: (
        "post",
        "/api/services/",
        {"slug": "new-service", "name": "New service", "team": "kb-team"},
        Service,
        201,
    ),
    "update_service": lambda w: (
        "patch",
        f"/api/services/{w.service.slug}/",
        {"name": "Renamed", "tier": "production"},
        Service,
        200,
    ),
    "create_asset": lambda w: ("post", "/api/assets/", _asset_payload(), ModelAsset, 201),
    "update_asset": lambda w: (
        "patch",
        f"/api/assets/{w.asset.pk}/",
        {"family": "qwen3"},
        ModelAsset,
        200,
    ),
    "create_runtime": lambda w: ("post", "/api/runtimes/", _runtime_payload(), Runtime, 201),
    "update_runtime": lambda w: (
        "patch",
        f"/api/runtimes/{w.runtime.name}/",
        {"engine_version": "0.6.4"},
        Runtime,
        200,
    ),
    "create_revision": lambda w: (
        "post",
        "/api/revisions/",
        {
            "service": w.service.slug,
            "model_asset": w.asset.pk,
            "runtime": w.runtime.name,
            "context_limit": 32768,
            "gateway_policy_version": "gw-1",
        },
        Revision,
        201,
    ),
    "update_revision": lambda w: (
        "patch",
        f"/api/revisions/{w.revision.pk}/",
        {"context_limit": 65536},
        Revision,
        200,
    ),
    "new_revision_from": lambda w: (
        "post",
        f"/api/revisions/{w.revision.pk}/new-revision/",
        {"gateway_policy_version": "gw-1", "notes": "the same parts, again"},
        Revision,
        201,
    ),
    "create_capability": lambda w: (
        "post",
        "/api/capabilities/",
        {"revision": w.revision.pk, "kind": "tool_calling", "value": True},
        Capability,
        201,
    ),
    "update_capability": lambda w: (
        "patch",
        f"/api/capabilities/{w.capability.pk}/",
        {"value": "websocket"},
        Capability,
        200,
    ),
}

# Who, and what every write answers them.
CAST = {
    "owner": "allowed",
    "other_owner": 403,
    "sre": 403,
    "security": 403,
    "business": 403,
    "auditor": 403,
    "outsider": 403,
    "anonymous": 401,
}


def _rows(model) -> list[dict]:
    return list(model.objects.order_by("pk").values())


@pytest.mark.parametrize("write", sorted(WRITES))
@pytest.mark.parametrize("who", sorted(CAST))
def test_write_permission_matrix(client, request, world, who, write):
    method, url, payload, model, success = WRITES[write](world)
    if who != "anonymous":
        client.force_login(request.getfixturevalue(who))
    else:
        # Other cast members exist too, so refusals are not about an empty team.
        request.getfixturevalue("owner")
    events_before = Event.objects.count()
    rows_before = _rows(model)
    # A new revision from another declares the source's capabilities again, each an event.
    copied = world.revision.capabilities.count() if write == "new_revision_from" else 0

    response = getattr(client, method)(url, payload, content_type="application/json")

    expected = success if CAST[who] == "allowed" else CAST[who]
    assert response.status_code == expected, response.content
    if expected in (401, 403):
        assert Event.objects.count() == events_before
        assert _rows(model) == rows_before
    else:
        assert Event.objects.count() == events_before + 1 + copied
        assert Event.objects.order_by("-sequence").first().actor_label == "olivia"


def test_auditor_cannot_create_a_service(client, auditor, team):
    client.force_login(auditor)

    response = client.post(
        "/api/services/",
        {"slug": "audit-made", "name": "Audit made", "team": "kb-team"},
        content_type="application/json",
    )

    assert response.status_code == 403
    assert "you can read it" in response.json()["detail"]
    assert not Service.objects.filter(slug="audit-made").exists()


def test_auditor_is_refused_before_a_bad_payload_is_even_read(client, auditor, team):
    client.force_login(auditor)

    response = client.post(
        "/api/assets/", {"weights_digest": "md5:x"}, content_type="application/json"
    )

    assert response.status_code == 403


def test_owner_of_another_team_cannot_move_a_service_into_it(client, owner, other_owner, world):
    # olivia owns kb-team but is no member of data-team.
    client.force_login(owner)
    events_before = Event.objects.count()

    response = client.patch(
        f"/api/services/{world.service.slug}/",
        {"team": "data-team"},
        content_type="application/json",
    )

    assert response.status_code == 403
    assert "data-team" in response.json()["detail"]
    assert Service.objects.get(pk=world.service.pk).team.slug == "kb-team"
    assert Event.objects.count() == events_before


@pytest.mark.parametrize(
    ("url", "model"),
    [
        (lambda w: f"/api/assets/{w.asset.pk}/", ModelAsset),
        (lambda w: f"/api/runtimes/{w.runtime.name}/", Runtime),
    ],
    ids=["asset", "runtime"],
)
def test_an_owner_cannot_move_an_asset_or_runtime_into_a_team_not_theirs(
    client, owner, other_owner, world, url, model
):
    # The attack: olivia owns kb-team's objects and PATCHes one over to data-team.
    client.force_login(owner)
    obj = model.objects.get(pk=(world.asset if model is ModelAsset else world.runtime).pk)
    events_before = Event.objects.count()

    response = client.patch(url(world), {"team": "data-team"}, content_type="application/json")

    assert response.status_code == 403
    assert response.json()["detail"] == "Only model owners of team 'data-team' can change this."
    assert model.objects.get(pk=obj.pk).team.slug == "kb-team"
    assert Event.objects.count() == events_before


def test_an_owner_of_both_teams_may_move_a_runtime(client, owner, world):
    TeamFactory(slug="data-team", members=[owner])
    client.force_login(owner)

    response = client.patch(
        f"/api/runtimes/{world.runtime.name}/",
        {"team": "data-team"},
        content_type="application/json",
    )

    assert response.status_code == 200
    assert Runtime.objects.get(pk=world.runtime.pk).team.slug == "data-team"
    event = Event.objects.filter(action="runtime.updated").latest("sequence")
    assert event.payload_data["after"]["team"] != event.payload_data["before"]["team"]


def test_an_upload_is_refused_before_its_fields_are_validated(client, auditor, world):
    client.force_login(auditor)

    response = client.post(
        f"/api/revisions/{world.revision.pk}/loadtests/", {"workload": "no-such-class"}
    )

    assert response.status_code == 403
    assert response.json()["detail"] == (
        f"Only model owners of team 'kb-team' can attach load-test reports to {world.revision}."
    )


def test_owner_of_another_team_cannot_register_assets_for_it(client, other_owner, world):
    client.force_login(other_owner)

    response = client.post("/api/assets/", _asset_payload(), content_type="application/json")

    assert response.status_code == 403
    assert "kb-team" in response.json()["detail"]
    assert not ModelAsset.objects.filter(name="Qwen2.5-14B-Instruct").exists()


def test_superuser_writes_in_any_team(client, world):
    admin = UserFactory(username="root", is_superuser=True, is_staff=True)
    client.force_login(admin)

    response = client.post("/api/runtimes/", _runtime_payload(), content_type="application/json")

    assert response.status_code == 201
    assert Event.objects.order_by("-sequence").first().actor_label == "root"


def test_only_security_reviews_a_license(client, owner, security, world):
    url = f"/api/assets/{world.asset.pk}/license-review/"
    client.force_login(owner)
    refused = client.post(url, {"license_approval": "approved"}, content_type="application/json")
    client.force_login(security)

    response = client.post(url, {"license_approval": "approved"}, content_type="application/json")

    assert refused.status_code == 403
    assert response.status_code == 200
    assert response.json()["license_approval"] == "approved"
    assert Event.objects.order_by("-sequence").first().action == "model_asset.license_reviewed"


def test_only_security_classifies_a_license(client, owner, security, db):
    payload = {"spdx_id": "MIT", "name": "MIT License"}
    client.force_login(owner)
    refused = client.post("/api/licenses/", payload, content_type="application/json")
    client.force_login(security)

    response = client.post("/api/licenses/", payload, content_type="application/json")

    assert refused.status_code == 403
    assert response.status_code == 201
    # The kind of a well-known license is filled in by the domain.
    assert response.json()["kind"] == "permissive"


def test_teams_are_read_only_over_the_api(client, owner, team):
    client.force_login(owner)

    assert (
        client.post("/api/teams/", {"slug": "x", "name": "X"}, content_type="application/json")
    ).status_code == 405
    assert (
        client.patch("/api/teams/kb-team/", {"name": "X"}, content_type="application/json")
    ).status_code == 405


def test_nothing_in_the_registry_is_deleted_or_replaced_over_the_api(client, owner, world):
    client.force_login(owner)

    assert client.delete(f"/api/services/{world.service.slug}/").status_code == 405
    assert client.delete(f"/api/revisions/{world.revision.pk}/").status_code == 405
    assert (
        client.put(
            f"/api/services/{world.service.slug}/",
            {"slug": "kb-assistant", "name": "X", "team": "kb-team"},
            content_type="application/json",
        )
    ).status_code == 405
    assert Service.objects.filter(pk=world.service.pk).exists()
