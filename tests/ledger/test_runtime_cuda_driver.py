"""A runtime's CUDA and GPU driver versions: stated in forms and the API, listed in the
revision diff and the CycloneDX BOM, and counted in the fingerprint only once stated."""

from __future__ import annotations

import hashlib
import json

import pytest
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator

from ledger import queries, services
from ledger.chain import canonical_json
from ledger.cyclonedx import revision_bom
from ledger.fingerprint import compute_fingerprint
from ledger.models import Event, Revision, Runtime
from tests.ledger.factories import ModelAssetFactory, RevisionFactory, RuntimeFactory

pytestmark = pytest.mark.django_db


def _fingerprint_before_cuda(asset, runtime, context_limit: int) -> str:
    """The recipe as it was before runtimes had CUDA and driver versions."""
    parts = {
        "weights_digest": asset.weights_digest,
        "tokenizer_digest": asset.tokenizer_digest,
        "chat_template_digest": asset.chat_template_digest,
        "generation_config_digest": asset.generation_config_digest,
        "image_digest": runtime.image_digest or runtime.image,
        "launch_parameters": runtime.launch_parameters,
        "context_limit": context_limit,
    }
    return "sha256:" + hashlib.sha256(canonical_json(parts).encode()).hexdigest()


def test_a_runtime_without_cuda_or_driver_keeps_the_fingerprint_it_had(team):
    asset = ModelAssetFactory(team=team)
    runtime = RuntimeFactory(team=team)

    assert runtime.cuda_version == runtime.driver_version == ""
    assert compute_fingerprint(asset, runtime, 32768) == _fingerprint_before_cuda(
        asset, runtime, 32768
    )


def test_each_stated_version_changes_the_fingerprint(team):
    asset = ModelAssetFactory(team=team)
    runtime = RuntimeFactory(team=team)
    base = compute_fingerprint(asset, runtime, 32768)

    runtime.cuda_version = "12.4.1"
    with_cuda = compute_fingerprint(asset, runtime, 32768)
    runtime.driver_version = "550.54.15"
    with_both = compute_fingerprint(asset, runtime, 32768)

    assert len({base, with_cuda, with_both}) == 3


def test_stating_the_cuda_version_later_is_a_recorded_fingerprint_change(team):
    revision = RevisionFactory(service__team=team)
    before = revision.fingerprint

    services.update_runtime(revision.runtime, actor=None, cuda_version="12.4.1")

    revision.refresh_from_db()
    assert revision.fingerprint != before
    event = Event.objects.get(action="revision.fingerprint_changed")
    assert event.payload_data["before"] == {"fingerprint": before}
    check = queries.fingerprint_check(Revision.objects.with_parts().get(pk=revision.pk))
    assert check.components["cuda_version"] == "12.4.1"
    assert "driver_version" not in check.components
    assert not check.stale


def _runtime_like(runtime: Runtime, **changes) -> Runtime:
    fields = {
        name: getattr(runtime, name)
        for name in ("engine", "engine_version", "image", "launch_parameters", "gpu_model")
    }
    return RuntimeFactory(team=runtime.team, **{**fields, **changes})


def _diff(a: Revision, b: Revision) -> dict[str, dict]:
    a, b = (Revision.objects.with_parts().get(pk=r.pk) for r in (a, b))
    return {change["field"]: change for change in queries.revision_diff(a, b)}


def test_the_diff_lists_a_cuda_and_driver_upgrade_without_calling_it_breaking(team):
    r1 = RevisionFactory(service__team=team)
    services.update_runtime(
        r1.runtime, actor=None, cuda_version="12.1", driver_version="535.104.05"
    )
    r1.runtime.refresh_from_db()
    runtime = _runtime_like(r1.runtime, cuda_version="12.4.1", driver_version="550.54.15")
    r2 = services.new_revision_from(r1, actor=None, runtime=runtime)

    changes = _diff(r1, r2)

    assert set(changes) == {"cuda_version", "driver_version"}
    assert changes["cuda_version"] == {
        "field": "cuda_version",
        "from": "12.1",
        "to": "12.4.1",
        "breaking": False,
        "why": "another CUDA runtime: kernels and numerics may differ; load-test evidence "
        "does not carry over",
    }
    assert changes["driver_version"]["from"] == "535.104.05"
    assert changes["driver_version"]["to"] == "550.54.15"
    assert "another GPU driver" in changes["driver_version"]["why"]


def test_the_diff_says_when_a_version_is_first_stated(team):
    r1 = RevisionFactory(service__team=team)
    r2 = services.new_revision_from(
        r1, actor=None, runtime=_runtime_like(r1.runtime, driver_version="550.54.15")
    )

    changes = _diff(r1, r2)

    assert set(changes) == {"driver_version"}
    assert changes["driver_version"]["from"] is None
    assert changes["driver_version"]["why"] == "the GPU driver version is now stated (550.54.15)"


def _container(document: dict) -> dict:
    return next(c for c in document["components"] if c["type"] == "container")


def test_the_bom_carries_stated_versions_on_the_container_and_validates(team):
    made = RevisionFactory(
        service__team=team,
        runtime=RuntimeFactory(team=team, cuda_version="12.4.1", driver_version="550.54.15"),
    )
    document = revision_bom(Revision.objects.with_parts().get(pk=made.pk))

    error = JsonStrictValidator(SchemaVersion.V1_6).validate_str(json.dumps(document))
    assert error is None, error
    properties = {p["name"]: p["value"] for p in _container(document)["properties"]}
    assert properties["ledger:cuda_version"] == "12.4.1"
    assert properties["ledger:driver_version"] == "550.54.15"


def test_the_bom_of_a_runtime_without_them_names_neither(team):
    made = RevisionFactory(service__team=team)
    document = revision_bom(Revision.objects.with_parts().get(pk=made.pk))

    names = {p["name"] for p in _container(document)["properties"]}
    assert not names & {"ledger:cuda_version", "ledger:driver_version"}


def test_the_api_takes_and_returns_them_and_refuses_a_bad_one_by_name(client, owner, team):
    client.force_login(owner)
    body = {
        "name": "vllm-cuda",
        "team": team.slug,
        "engine": "vllm",
        "engine_version": "0.8.5",
        "image": RuntimeFactory.build(name="x").image,
        "cuda_version": "12.4.1",
        "driver_version": "550.54.15",
    }

    created = client.post("/api/runtimes/", body, content_type="application/json")
    refused = client.post(
        "/api/runtimes/",
        {**body, "name": "vllm-bad", "driver_version": "550 54"},
        content_type="application/json",
    )

    assert created.status_code == 201, created.content
    assert created.json()["cuda_version"] == "12.4.1"
    assert created.json()["driver_version"] == "550.54.15"
    assert refused.status_code == 400
    assert set(refused.json()) == {"driver_version"}
    assert not Runtime.objects.filter(name="vllm-bad").exists()


def test_the_runtime_page_shows_them(client, auditor, team):
    runtime = RuntimeFactory(team=team, cuda_version="12.4.1")
    client.force_login(auditor)

    page = client.get(f"/runtimes/{runtime.name}/").content.decode()

    assert "<dt>CUDA version</dt><dd>12.4.1</dd>" in page
    assert "<dt>GPU driver version</dt><dd>not stated</dd>" in page


def test_the_runtime_form_takes_them_and_names_a_bad_one_beside_its_field(client, owner, team):
    from tests.ledger.test_views_runtimes import runtime_data

    client.force_login(owner)

    refused = client.post("/runtimes/new", runtime_data(team, cuda_version="12.4 beta"))
    created = client.post(
        "/runtimes/new", runtime_data(team, cuda_version="12.4.1", driver_version="550.54.15")
    )

    assert refused.status_code == 200
    assert "cuda_version" in refused.context["form"].errors
    assert created.status_code == 302
    runtime = Runtime.objects.get()
    assert (runtime.cuda_version, runtime.driver_version) == ("12.4.1", "550.54.15")
