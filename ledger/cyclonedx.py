"""A revision as a CycloneDX 1.6 ML-BOM: the model asset as a `machine-learning-model`
component (hashes, license, lineage, tokenizer and chat template, a model card), the
runtime image as a `container` pinned by digest, the engine as a `framework`, and the
gateway policy version it runs with as a `data` component of data type `configuration`.
The runtime's CUDA and driver versions, when stated, are properties of the container.

cyclonedx-python-lib builds and serializes everything except `modelCard` and a data
component's `data`, which it has no model for yet; those parts are added to the
serialized document as plain data. The BOM is
deterministic for a revision (serial number from its fingerprint, timestamp from when it
was created), so its digest can be pinned in an evidence bundle.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from cyclonedx.model import (
    ExternalReference,
    ExternalReferenceType,
    HashAlgorithm,
    HashType,
    Property,
    XsUri,
)
from cyclonedx.model.bom import Bom, BomMetaData
from cyclonedx.model.component import Component, ComponentType, Pedigree
from cyclonedx.model.dependency import Dependency
from cyclonedx.model.license import DisjunctiveLicense
from cyclonedx.output.json import JsonV1Dot6
from cyclonedx.spdx import is_supported_id

from ledger import queries
from ledger.chain import canonical_json
from ledger.models import GatewayPolicy, LoadTestReport, ModelAsset, Revision, Runtime
from ledger.validators import parse_image

MEDIA_TYPE = "application/vnd.cyclonedx+json; version=1.6"
# How deep a derived-from chain is followed (a quantization of a merge of a fine-tune…).
MAX_LINEAGE = 8
_NAMESPACE = uuid.UUID("6f1c9d4e-3b7a-4c61-9a0e-2d8f5b7c1e90")


def _sha256(digest: str) -> list[HashType]:
    hex_part = digest.removeprefix("sha256:")
    return [HashType(alg=HashAlgorithm.SHA_256, content=hex_part)] if hex_part else []


def _license(spdx_id: str) -> DisjunctiveLicense:
    return (
        DisjunctiveLicense(id=spdx_id)
        if is_supported_id(spdx_id)
        else DisjunctiveLicense(name=spdx_id)
    )


def _url(value: str) -> XsUri | None:
    return XsUri(value) if value.startswith(("https://", "http://")) else None


def _asset_component(asset: ModelAsset, *, ref: str, with_lineage: bool) -> Component:
    references = []
    source = _url(asset.source_repository)
    if source is not None:
        references.append(ExternalReference(type=ExternalReferenceType.DISTRIBUTION, url=source))
    card = _url(asset.model_card_url)
    if card is not None:
        references.append(ExternalReference(type=ExternalReferenceType.MODEL_CARD, url=card))
    properties = [
        Property(name="ledger:source_repository", value=asset.source_repository),
        Property(name="ledger:quantization", value=asset.quantization),
        Property(name="ledger:derivation", value=asset.derivation),
        Property(name="ledger:license_approval", value=asset.license_approval),
        Property(name="ledger:config_digest", value=asset.config_digest),
        Property(name="ledger:generation_config_digest", value=asset.generation_config_digest),
    ]
    pedigree = None
    if with_lineage:
        ancestors = _lineage(asset)
        pedigree = Pedigree(ancestors=ancestors) if ancestors else None
    return Component(
        type=ComponentType.MACHINE_LEARNING_MODEL,
        bom_ref=ref,
        name=asset.name,
        version=asset.revision,
        group=asset.family,
        hashes=_sha256(asset.weights_digest),
        licenses=[_license(asset.license.spdx_id)],
        external_references=references,
        properties=properties,
        pedigree=pedigree,
    )


def _lineage(asset: ModelAsset) -> list[Component]:
    """The assets it was derived from, nearest first (one query per step, bounded)."""
    ancestors: list[Component] = []
    current = asset
    for _ in range(MAX_LINEAGE):
        if current.derived_from_id is None:
            break
        parent = ModelAsset.objects.select_related("license").get(pk=current.derived_from_id)
        ancestors.append(_asset_component(parent, ref=f"model:{parent.pk}", with_lineage=False))
        current = parent
    return ancestors


def _data_component(ref: str, name: str, digest: str, version: str = "") -> Component:
    return Component(
        type=ComponentType.DATA,
        bom_ref=ref,
        name=name,
        version=version or None,
        hashes=_sha256(digest),
    )


def _policy_component(policy: GatewayPolicy, *, ref: str, service: str) -> Component:
    """The gateway policy version as a `data` component: CycloneDX 1.6 gives data
    components a `data[].type` of `configuration` ("parameters or settings that may be
    used by other components"), which is what a gateway policy is to the service: the
    limits, quotas and fallbacks the gateway applies in front of it. (`formulation`
    says how a component was made, not what it runs with; a bare property on the root
    would carry no hash.) Its version is the label revisions name it by; its hash the
    sha256 of the document's canonical JSON, the text `_policy_data` attaches. A version
    recorded by name only has no document, so no hash: a property says it is unknown."""
    return Component(
        type=ComponentType.DATA,
        bom_ref=ref,
        name=f"{service} gateway policy",
        version=policy.label,
        hashes=_sha256(policy.sha256) if policy.known else [],
        properties=[
            Property(name="ledger:gateway_policy_version", value=str(policy.version)),
            Property(name="ledger:gateway_policy_known", value="true" if policy.known else "false"),
        ],
    )


def _policy_data(policy: GatewayPolicy, *, service: str) -> list[dict[str, Any]]:
    """The component's CycloneDX `data`: the document itself, as the canonical JSON its
    hash was computed over, so the BOM alone can be checked."""
    data: dict[str, Any] = {
        "type": "configuration",
        "name": f"{service} gateway policy {policy.label}",
    }
    if policy.known:
        data["contents"] = {
            "attachment": {
                "contentType": "application/json",
                "content": canonical_json(policy.document),
            }
        }
        data["description"] = (
            "What the LLM gateway enforces in front of the service: limits, tenant quotas, "
            "fallbacks, degradation per task type, retries and egress."
        )
    else:
        data["description"] = (
            "Recorded by name only, before gateway policies were versioned: the document "
            "is unknown."
        )
    return [data]


def _model_card(revision: Revision, reports: list[LoadTestReport]) -> dict[str, Any]:
    """CycloneDX 1.6 `modelCard`: what the registry knows, nothing invented."""
    asset = revision.model_asset
    metrics = []
    for report in reports:
        for metric in ("ttft_p95_ms", "ttft_p99_ms", "tpot_p95_ms", "output_tokens_per_s"):
            value = getattr(report, metric)
            if value is not None:
                metrics.append(
                    {"type": metric, "value": f"{value:g}", "slice": f"workload={report.workload}"}
                )
    task_types = list(revision.service.task_types.values_list("slug", flat=True))
    card: dict[str, Any] = {
        "modelParameters": {
            "approach": {"type": "self-supervised"},
            "architectureFamily": asset.family,
            "inputs": [{"format": "text"}],
            "outputs": [{"format": "text"}],
        },
        "considerations": {
            "useCases": task_types,
            "technicalLimitations": [f"context limit {revision.context_limit} tokens"],
        },
    }
    if metrics:
        card["quantitativeAnalysis"] = {"performanceMetrics": metrics}
    return card


def _stated_versions(runtime: Runtime) -> list[Property]:
    """The CUDA runtime in the image and the host driver it ran on, when the runtime states them."""
    stated = (
        ("ledger:cuda_version", runtime.cuda_version),
        ("ledger:driver_version", runtime.driver_version),
    )
    return [Property(name=name, value=value) for name, value in stated if value]


def revision_bom(revision: Revision) -> dict[str, Any]:
    """The ML-BOM of a revision as a JSON-ready dict (expects `Revision.objects.with_parts()`)."""
    asset = revision.model_asset
    runtime = revision.runtime
    image = parse_image(runtime.image)
    model_ref = f"model:{asset.pk}"
    image_ref = f"image:{runtime.pk}"
    engine_ref = f"engine:{runtime.engine}:{runtime.engine_version}"
    tokenizer_ref = f"tokenizer:{asset.pk}"
    template_ref = f"chat-template:{asset.pk}"
    root_ref = f"revision:{revision.pk}"
    policy = revision.gateway_policy
    policy_ref = f"gateway-policy:{policy.pk}"
    components = [
        _asset_component(asset, ref=model_ref, with_lineage=True),
        _data_component(
            tokenizer_ref, asset.tokenizer_id or f"{asset.name} tokenizer", asset.tokenizer_digest
        ),
        _data_component(template_ref, f"{asset.name} chat template", asset.chat_template_digest),
        Component(
            type=ComponentType.CONTAINER,
            bom_ref=image_ref,
            name=image.name,
            version=image.tag,
            hashes=_sha256(image.digest or ""),
            properties=[
                Property(name="ledger:image", value=runtime.image),
                Property(
                    name="ledger:launch_parameters",
                    value=json.dumps(runtime.launch_parameters, sort_keys=True),
                ),
                Property(name="ledger:gpu", value=f"{runtime.gpu_count} x {runtime.gpu_model}"),
                *_stated_versions(runtime),
            ],
        ),
        Component(
            type=ComponentType.FRAMEWORK,
            bom_ref=engine_ref,
            name=runtime.engine,
            version=runtime.engine_version,
        ),
        _policy_component(policy, ref=policy_ref, service=revision.service.slug),
    ]
    root = Component(
        type=ComponentType.APPLICATION,
        bom_ref=root_ref,
        name=f"{revision.service.slug} {revision.label}",
        version=revision.label,
        properties=[
            Property(name="ledger:fingerprint", value=revision.fingerprint),
            Property(name="ledger:context_limit", value=str(revision.context_limit)),
            Property(name="ledger:gateway_policy_version", value=revision.gateway_policy_version),
        ],
    )
    bom = Bom(
        serial_number=uuid.uuid5(_NAMESPACE, revision.fingerprint),
        metadata=BomMetaData(component=root, timestamp=revision.created_at),
        components=components,
    )
    by_ref = {str(c.bom_ref): c for c in [root, *components]}
    bom.dependencies.update(
        [
            Dependency(
                ref=root.bom_ref,
                dependencies=[
                    Dependency(ref=by_ref[r].bom_ref)
                    for r in (model_ref, image_ref, engine_ref, policy_ref)
                ],
            ),
            Dependency(
                ref=by_ref[model_ref].bom_ref,
                dependencies=[
                    Dependency(ref=by_ref[r].bom_ref) for r in (tokenizer_ref, template_ref)
                ],
            ),
            Dependency(
                ref=by_ref[image_ref].bom_ref,
                dependencies=[Dependency(ref=by_ref[engine_ref].bom_ref)],
            ),
        ]
    )
    document: dict[str, Any] = json.loads(JsonV1Dot6(bom).output_as_string())
    reports = queries.current_reports(revision)
    for component in document["components"]:
        if component.get("bom-ref") == model_ref:
            component["modelCard"] = _model_card(revision, reports)
        elif component.get("bom-ref") == policy_ref:
            component["data"] = _policy_data(policy, service=revision.service.slug)
    return document
