"""A revision's CycloneDX 1.6 ML-BOM, checked with the library's strict JSON validator."""

from __future__ import annotations

import hashlib
import json

import pytest
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from django.urls import reverse

from ledger import services
from ledger.cyclonedx import revision_bom
from ledger.models import ModelAsset, Revision
from tests.ledger.evidence.conftest import import_file, sample_asset, sample_runtime
from tests.ledger.factories import (
    LicenseFactory,
    ModelAssetFactory,
    RevisionFactory,
    ServiceFactory,
)

pytestmark = pytest.mark.django_db

VALIDATOR = JsonStrictValidator(SchemaVersion.V1_6)
POLICY = {
    "limits": {"max_input_tokens": 8192, "max_output_tokens": 1024, "timeout_s": 60},
    "egress": {"external_fallback_allowed": False},
}


def _valid(document: dict) -> None:
    error = VALIDATOR.validate_str(json.dumps(document))
    assert error is None, error


@pytest.fixture
def revision(team):
    base = ModelAssetFactory(
        team=team,
        name="Qwen2.5-7B-Instruct",
        model_card_url="https://huggingface.co/Qwen/Qwen2.5-7B-Instruct",
    )
    quantized = ModelAssetFactory(
        team=team,
        name="Qwen2.5-7B-Instruct-AWQ",
        derived_from=base,
        derivation=ModelAsset.Derivation.QUANTIZED,
        quantization=ModelAsset.Quantization.INT4_AWQ,
        license=base.license,
        tokenizer_id="Qwen/Qwen2.5-7B-Instruct",
    )
    service = ServiceFactory(slug="kb-assistant", team=team)
    services.update_service(service, actor=None, task_types=["chat", "rag"])
    made = RevisionFactory(service=service, model_asset=quantized)
    return Revision.objects.with_parts().get(pk=made.pk)


def _component(document: dict, kind: str) -> dict:
    return next(c for c in document["components"] if c["type"] == kind)


def test_the_bom_validates_against_cyclonedx_1_6_and_names_every_part(revision):
    document = revision_bom(revision)
    _valid(document)
    assert document["specVersion"] == "1.6"

    model = _component(document, "machine-learning-model")
    asset = revision.model_asset
    assert model["name"] == "Qwen2.5-7B-Instruct-AWQ"
    assert model["hashes"] == [
        {"alg": "SHA-256", "content": asset.weights_digest.removeprefix("sha256:")}
    ]
    assert model["licenses"] == [{"license": {"id": asset.license.spdx_id}}]
    assert [a["name"] for a in model["pedigree"]["ancestors"]] == ["Qwen2.5-7B-Instruct"]
    assert model["modelCard"]["modelParameters"]["architectureFamily"] == asset.family
    assert model["modelCard"]["considerations"]["useCases"] == ["chat", "rag"]

    data = {c["name"]: c for c in document["components"] if c["type"] == "data"}
    assert data["Qwen/Qwen2.5-7B-Instruct"]["hashes"][0][
        "content"
    ] == asset.tokenizer_digest.removeprefix("sha256:")
    assert data["Qwen2.5-7B-Instruct-AWQ chat template"]["hashes"][0][
        "content"
    ] == asset.chat_template_digest.removeprefix("sha256:")

    image = _component(document, "container")
    assert image["hashes"][0]["content"] == revision.runtime.image_digest.removeprefix("sha256:")
    engine = _component(document, "framework")
    assert (engine["name"], engine["version"]) == ("vllm", revision.runtime.engine_version)

    root = document["metadata"]["component"]
    assert {"name": "ledger:fingerprint", "value": revision.fingerprint} in root["properties"]
    depends = {d["ref"]: set(d.get("dependsOn", [])) for d in document["dependencies"]}
    policy = data["kb-assistant gateway policy"]
    assert depends[root["bom-ref"]] == {
        model["bom-ref"],
        image["bom-ref"],
        engine["bom-ref"],
        policy["bom-ref"],
    }


def test_the_bom_names_a_known_policy_version_with_its_hash_and_document(team, owner):
    service = ServiceFactory(slug="kb-assistant", team=team)
    policy = services.create_gateway_policy(service, actor=owner, document=POLICY)
    made = RevisionFactory(service=service, gateway_policy_version=policy.label)

    document = revision_bom(Revision.objects.with_parts().get(pk=made.pk))

    _valid(document)
    component = next(c for c in document["components"] if c["bom-ref"].startswith("gateway-"))
    assert (component["type"], component["name"], component["version"]) == (
        "data",
        "kb-assistant gateway policy",
        "v1",
    )
    assert component["hashes"] == [
        {"alg": "SHA-256", "content": policy.sha256.removeprefix("sha256:")}
    ]
    [data] = component["data"]
    assert data["type"] == "configuration"
    attached = data["contents"]["attachment"]["content"]
    # The attachment is the text the hash was computed over: the BOM checks itself.
    assert "sha256:" + hashlib.sha256(attached.encode()).hexdigest() == policy.sha256
    assert json.loads(attached) == POLICY
    root = document["metadata"]["component"]
    assert {"name": "ledger:gateway_policy_version", "value": "v1"} in root["properties"]


def test_the_bom_names_an_unknown_policy_version_without_a_hash(revision):
    document = revision_bom(revision)

    _valid(document)
    component = next(c for c in document["components"] if c["bom-ref"].startswith("gateway-"))
    assert component["version"] == "gw-1"
    assert "hashes" not in component
    assert {"name": "ledger:gateway_policy_known", "value": "false"} in component["properties"]
    [data] = component["data"]
    assert data["type"] == "configuration" and "contents" not in data
    assert "unknown" in data["description"]


def test_the_bom_is_the_same_document_each_time(revision):
    assert revision_bom(revision) == revision_bom(revision)


def test_a_custom_license_ref_is_named_not_given_as_an_spdx_id(team):
    custom = LicenseFactory(spdx_id="LicenseRef-Acme-Model-1.0", name="Acme model license")
    made = RevisionFactory(
        service=ServiceFactory(team=team), model_asset=ModelAssetFactory(team=team, license=custom)
    )
    document = revision_bom(Revision.objects.with_parts().get(pk=made.pk))
    _valid(document)
    assert _component(document, "machine-learning-model")["licenses"] == [
        {"license": {"name": "LicenseRef-Acme-Model-1.0"}}
    ]


def test_current_evidence_becomes_the_model_cards_performance_metrics(team):
    made = RevisionFactory(
        service=ServiceFactory(team=team),
        model_asset=sample_asset(team),
        runtime=sample_runtime(team),
    )
    revision = Revision.objects.with_parts().get(pk=made.pk)
    import_file(revision, "vllm", "vllm_c2_n20_detailed.json", workload="short")
    document = revision_bom(revision)
    _valid(document)
    metrics = _component(document, "machine-learning-model")["modelCard"]["quantitativeAnalysis"][
        "performanceMetrics"
    ]
    assert {m["type"] for m in metrics} >= {"ttft_p95_ms", "tpot_p95_ms"}
    assert all(m["slice"] == "workload=short" for m in metrics)


def test_the_api_and_the_download_serve_it(client, auditor, revision):
    client.force_login(auditor)
    body = client.get(f"/api/revisions/{revision.pk}/cyclonedx/").json()
    _valid(body)
    download = client.get(
        reverse("ledger:revision_cyclonedx", args=["kb-assistant", revision.number])
    )
    assert download["Content-Type"].startswith("application/vnd.cyclonedx+json")
    assert 'filename="kb-assistant-r1.cdx.json"' in download["Content-Disposition"]
    assert json.loads(download.content) == body
    assert client.get("/api/revisions/999999/cyclonedx/").status_code == 404
