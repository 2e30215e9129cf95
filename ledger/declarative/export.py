"""The registry, written back in the document format.

`*_view()` functions give a row in document terms with every key; `apply`
diffs a document against them, so what export writes and what apply compares
are the same thing. `export_document()` drops keys that hold their default
(except `tier`, `exposure`, `quantization` and `kind`, which a reader should
see without knowing the defaults) and orders everything deterministically, so
export → apply on an empty database → export gives the same bytes.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import yaml
from django.db.models import Prefetch

from ledger import gateway_policy as policy_document
from ledger.declarative.extensions import extensions
from ledger.declarative.schema import FORMAT_VERSION, SLO_FIELDS
from ledger.models import (
    Capability,
    GatewayPolicy,
    License,
    LicenseAcceptance,
    ModelAsset,
    Revision,
    Runtime,
    Service,
    Team,
)

HEADER = (
    "# Inference Release Ledger registry.\n"
    "# Apply with: python manage.py apply FILE [--dry-run]. Format: docs/registry-format.md\n"
)

# Key -> the value that is left out of an export (the model default).
DEFAULTS: dict[str, dict[str, Any]] = {
    "team": {"members": []},
    "license": {"gated": False, "terms_url": ""},
    "acceptance": {"note": ""},
    "model_asset": {
        "license_approval": ModelAsset.LicenseApproval.PENDING,
        "derived_from": None,
        "derivation": ModelAsset.Derivation.BASE,
        "tokenizer_id": "",
        "model_card_url": "",
        "lifecycle": ModelAsset.Lifecycle.ACTIVE,
        "deprecated_on": None,
        "retired_on": None,
        "license_acceptances": [],
    },
    "runtime": {
        "launch_parameters": {},
        "gpu_model": "",
        "gpu_count": 1,
        "gpu_memory_gb": None,
        "cuda_version": "",
        "driver_version": "",
    },
    "service": {
        "description": "",
        "task_types": [],
        "tenants": [],
        "slos": {},
        "review_cadence_days": 90,
        "live_revision": None,
        "gateway_policies": [],
        "revisions": [],
    },
    "gateway_policy": {"note": ""},
    "revision": {"based_on": None, "notes": "", "capabilities": {}},
}


# Capabilities are written in the order the model declares their kinds.
_KIND_ORDER = {kind: index for index, kind in enumerate(Capability.Kind.values)}


def asset_ref(asset: ModelAsset) -> str:
    return f"{asset.name}@{asset.revision}"


def sorted_json(value: Any) -> Any:
    """JSON with mapping keys sorted: PostgreSQL's jsonb does not keep the written order."""
    if isinstance(value, dict):
        return {key: sorted_json(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [sorted_json(item) for item in value]
    return value


def in_schema_order(value: Any, node: dict[str, Any] | None = None) -> Any:
    """A gateway policy with its keys in the order its JSON Schema declares them (limits
    first, as a reader expects), the keys of a free mapping (degradation's task types)
    sorted: jsonb keeps neither the written order nor an alphabetical one."""
    node = policy_document.schema() if node is None else node
    if isinstance(value, dict):
        properties = node.get("properties", {})
        free = node.get("additionalProperties")
        free = free if isinstance(free, dict) else {}
        ordered = {
            key: in_schema_order(value[key], properties[key]) for key in properties if key in value
        }
        for key in sorted(set(value) - set(properties)):
            ordered[key] = in_schema_order(value[key], free)
        return ordered
    if isinstance(value, list):
        return [in_schema_order(item, node.get("items", {})) for item in value]
    return value


# ---------------------------------------------------------------- views (every key)


def team_view(team: Team, members: list[str]) -> dict[str, Any]:
    return {"slug": team.slug, "name": team.name, "members": sorted(members)}


def license_view(license_: License) -> dict[str, Any]:
    return {
        "spdx_id": license_.spdx_id,
        "name": license_.name,
        "kind": license_.kind,
        "gated": license_.gated,
        "terms_url": license_.terms_url,
    }


def acceptance_view(acceptance: LicenseAcceptance) -> dict[str, Any]:
    return {
        "terms_version": acceptance.terms_version,
        "accepted_by": acceptance.accepted_by,
        "accepted_at": acceptance.accepted_at,
        "note": acceptance.note,
    }


def asset_view(asset: ModelAsset) -> dict[str, Any]:
    """Expects team, license and derived_from loaded (select_related)."""
    return {
        "name": asset.name,
        "revision": asset.revision,
        "team": asset.team.slug,
        "family": asset.family,
        "source_repository": asset.source_repository,
        "license": asset.license.spdx_id,
        "license_approval": asset.license_approval,
        "quantization": asset.quantization,
        "derived_from": asset_ref(asset.derived_from) if asset.derived_from is not None else None,
        "derivation": asset.derivation,
        "weights_digest": asset.weights_digest,
        "tokenizer_id": asset.tokenizer_id,
        "tokenizer_digest": asset.tokenizer_digest,
        "chat_template_digest": asset.chat_template_digest,
        "generation_config_digest": asset.generation_config_digest,
        "config_digest": asset.config_digest,
        "model_card_url": asset.model_card_url,
        "lifecycle": asset.lifecycle,
        "deprecated_on": asset.deprecated_on,
        "retired_on": asset.retired_on,
    }


def runtime_view(runtime: Runtime) -> dict[str, Any]:
    """Expects team loaded."""
    return {
        "name": runtime.name,
        "team": runtime.team.slug,
        "engine": runtime.engine,
        "engine_version": runtime.engine_version,
        "image": runtime.image,
        "launch_parameters": sorted_json(runtime.launch_parameters),
        "gpu_model": runtime.gpu_model,
        "gpu_count": runtime.gpu_count,
        "gpu_memory_gb": runtime.gpu_memory_gb,
        "cuda_version": runtime.cuda_version,
        "driver_version": runtime.driver_version,
    }


def service_view(service: Service, task_types: list[str]) -> dict[str, Any]:
    """Expects team and live_revision loaded. `slos` lists the keys that are set."""
    slos = {key: getattr(service, name) for key, name in SLO_FIELDS.items()}
    return {
        "slug": service.slug,
        "name": service.name,
        "description": service.description,
        "team": service.team.slug,
        "tier": service.tier,
        "exposure": service.exposure,
        "task_types": sorted(task_types),
        "tenants": list(service.tenants),
        "slos": slos,
        "review_cadence_days": service.review_cadence_days,
        "live_revision": service.live_revision.number
        if service.live_revision is not None
        else None,
    }


def gateway_policy_view(policy: GatewayPolicy) -> dict[str, Any]:
    """`label` is left out of an export when it is v<version>; `document` is None for a
    version known by name only."""
    return {
        "version": policy.version,
        "label": policy.label,
        "note": policy.note,
        "document": in_schema_order(policy.document) if policy.document is not None else None,
    }


def revision_view(revision: Revision) -> dict[str, Any]:
    """Expects model_asset, runtime and based_on loaded."""
    based_on = revision.based_on
    return {
        "number": revision.number,
        "model_asset": asset_ref(revision.model_asset),
        "runtime": revision.runtime.name,
        "context_limit": revision.context_limit,
        "gateway_policy_version": revision.gateway_policy_version,
        # The format names revisions of the same service only.
        "based_on": based_on.number
        if based_on is not None and based_on.service_id == revision.service_id
        else None,
        "notes": revision.notes,
    }


# ---------------------------------------------------------------- the document


def _prune(view: dict[str, Any], kind: str) -> dict[str, Any]:
    defaults = DEFAULTS[kind]
    return {
        key: value for key, value in view.items() if key not in defaults or value != defaults[key]
    }


def _export_decimal(value: Decimal) -> int | float:
    return int(value) if value == value.to_integral_value() else float(value)


def _asset_order(assets: list[ModelAsset]) -> list[ModelAsset]:
    """By name and revision, each asset after the one it derives from."""
    by_id = {asset.pk: asset for asset in assets}
    ordered: list[ModelAsset] = []
    placed: set[int] = set()

    def place(asset: ModelAsset) -> None:
        if asset.pk in placed:
            return
        placed.add(asset.pk)
        parent = by_id.get(asset.derived_from_id) if asset.derived_from_id is not None else None
        if parent is not None:
            place(parent)
        ordered.append(asset)

    for asset in sorted(assets, key=lambda a: (a.name, a.revision)):
        place(asset)
    return ordered


def export_document() -> dict[str, Any]:
    """The whole registry as a document (plain data, ready for `dump_document`)."""
    document: dict[str, Any] = {"version": FORMAT_VERSION}

    teams = []
    for team in Team.objects.order_by("slug").prefetch_related("members"):
        members = [user.get_username() for user in team.members.all()]
        teams.append(_prune(team_view(team, members), "team"))

    licenses = [_prune(license_view(lic), "license") for lic in License.objects.order_by("spdx_id")]

    assets = []
    queryset = ModelAsset.objects.select_related(
        "team", "license", "derived_from"
    ).prefetch_related(
        Prefetch(
            "license_acceptances",
            queryset=LicenseAcceptance.objects.order_by(
                "accepted_at", "terms_version", "accepted_by", "pk"
            ),
        )
    )
    for asset in _asset_order(list(queryset)):
        view = asset_view(asset)
        # Only acceptances of the asset's current license can be recorded again by apply.
        view["license_acceptances"] = [
            _prune(acceptance_view(acceptance), "acceptance")
            for acceptance in asset.license_acceptances.all()
            if acceptance.license_id == asset.license_id
        ]
        assets.append(_prune(view, "model_asset"))

    runtimes = [
        _prune(runtime_view(runtime), "runtime")
        for runtime in Runtime.objects.select_related("team").order_by("name")
    ]

    services = []
    service_rows = (
        Service.objects.select_related("team", "live_revision")
        .prefetch_related(
            "task_types",
            Prefetch("gateway_policies", queryset=GatewayPolicy.objects.order_by("version")),
            Prefetch(
                "revisions",
                queryset=Revision.objects.select_related(
                    "model_asset", "runtime", "based_on", "gateway_policy"
                )
                .prefetch_related("capabilities")
                .order_by("number"),
            ),
        )
        .order_by("slug")
    )
    for service in service_rows:
        view = service_view(service, [task.slug for task in service.task_types.all()])
        view["slos"] = {
            key: _export_decimal(value) if isinstance(value, Decimal) else value
            for key, value in view["slos"].items()
            if value is not None
        }
        policies = []
        for policy in service.gateway_policies.all():
            policy_doc = _prune(gateway_policy_view(policy), "gateway_policy")
            if policy_doc["label"] == f"v{policy.version}":
                del policy_doc["label"]
            policies.append(policy_doc)
        view["gateway_policies"] = policies
        revisions = []
        for revision in service.revisions.all():
            revision_doc = revision_view(revision)
            revision_doc["capabilities"] = {
                capability.kind: sorted_json(capability.value)
                for capability in sorted(
                    revision.capabilities.all(), key=lambda c: _KIND_ORDER.get(c.kind, 99)
                )
            }
            revisions.append(_prune(revision_doc, "revision"))
        view["revisions"] = revisions
        services.append(_prune(view, "service"))

    for key, entries in (
        ("teams", teams),
        ("licenses", licenses),
        ("model_assets", assets),
        ("runtimes", runtimes),
        ("services", services),
    ):
        if entries:
            document[key] = entries
    for extension in extensions():
        entries = extension.export()
        if entries:
            document[extension.key] = entries
    return document


# ---------------------------------------------------------------- YAML


class _FlowList(list):
    """A list of scalars, written on one line: members: [alice, bob]."""


class _Dumper(yaml.SafeDumper):
    def increase_indent(self, flow: bool = False, indentless: bool = False):
        # Indent list items under their key, as most hand-written YAML does.
        return super().increase_indent(flow, False)


def _represent_str(dumper: yaml.SafeDumper, value: str):
    if "\n" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


def _represent_flow_list(dumper: yaml.SafeDumper, value: _FlowList):
    return dumper.represent_sequence("tag:yaml.org,2002:seq", value, flow_style=True)


_Dumper.add_representer(str, _represent_str)
_Dumper.add_representer(_FlowList, _represent_flow_list)


def _flow_scalar_lists(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _flow_scalar_lists(item) for key, item in value.items()}
    if isinstance(value, list):
        scalars = all(not isinstance(item, dict | list) for item in value)
        if value and scalars and len(", ".join(str(item) for item in value)) <= 60:
            return _FlowList(value)
        return [_flow_scalar_lists(item) for item in value]
    return value


def dump_document(document: dict[str, Any]) -> str:
    text = yaml.dump(
        _flow_scalar_lists(document),
        Dumper=_Dumper,
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=False,
        width=100,
    )
    # A blank line between top-level sections and between their entries, for the reader.
    lines: list[str] = []
    for line in text.splitlines():
        top_key = line[:1] not in ("", " ", "-")
        first_item = bool(lines) and lines[-1].endswith(":") and lines[-1][:1] != " "
        if lines and (top_key or (line.startswith("  - ") and not first_item)):
            lines.append("")
        lines.append(line)
    return HEADER + "\n".join(lines) + "\n"
