"""Gateway policy versions: record one (a change is a new version), and find the version
a revision names.

Each version is an Event (`gateway_policy.created`) carrying the document and its
canonical-JSON sha256. A bad document is refused whole, every problem named by its
JSON path: the schema's (`ledger.gateway_policy`), then the registry's (a fallback to
a service that does not exist, a tenant the service does not list, a task type it
does not serve).
"""

from __future__ import annotations

import re
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import MaxLengthValidator
from django.db import transaction
from django.db.models import Max
from django.utils.translation import gettext as _

from ledger import gateway_policy as policy_document
from ledger import permissions
from ledger.chain import append_event
from ledger.models import GatewayPolicy, Revision, Service, TaskType
from ledger.validators import validate_name_token
from lib.actors import Actor

__all__ = [
    "create_gateway_policy",
    "created_payload",
    "document_problems",
    "policy_named",
    "revision_running",
]

VERSION_LABEL = re.compile(r"^v(\d+)$")
NAMED_BY_A_REVISION = "Named by a revision; its document is not recorded."
LABEL_MAX_LENGTH = GatewayPolicy._meta.get_field("label").max_length or 40


def registry_problems(service: Service, document: dict[str, Any]) -> list[str]:
    """What only the registry can say is wrong with a well-formed document."""
    problems = []
    targets = {
        f"fallbacks[{i}].to_service": f["to_service"]
        for i, f in enumerate(document.get("fallbacks", []))
    }
    targets.update(
        {
            f"degradation.{task}.to_service": rule["to_service"]
            for task, rule in sorted(document.get("degradation", {}).items())
            if "to_service" in rule
        }
    )
    existing = set(Service.objects.filter(slug__in=targets.values()).values_list("slug", flat=True))
    for where, slug in targets.items():
        if slug not in existing:
            problems.append(f"{where}: there is no service {slug}.")
    tenants = list(service.tenants or [])
    for index, tenant in enumerate(document.get("tenants", [])):
        if tenant["name"] not in tenants:
            listed = ", ".join(tenants) or "none"
            problems.append(
                f"tenants[{index}].name: {tenant['name']} is not a tenant of {service.slug} "
                f"(its tenants: {listed}); add it to the service first."
            )
    served = set(service.task_types.values_list("slug", flat=True))
    known = set(TaskType.objects.values_list("slug", flat=True))
    for task in sorted(document.get("degradation", {})):
        if task not in known:
            problems.append(f"degradation.{task}: {task} is not a known task type.")
        elif task not in served:
            problems.append(
                f"degradation.{task}: {service.slug} does not serve {task} "
                f"(it serves {', '.join(sorted(served)) or 'no task type yet'})."
            )
    return problems


def document_problems(service: Service, document: Any) -> list[str]:
    problems = policy_document.schema_problems(document)
    if problems:
        return problems
    problems = policy_document.shape_problems(document, service_slug=service.slug)
    return problems + registry_problems(service, document)


def _next_version(service: Service) -> tuple[int, str]:
    """The next number whose `v<n>` label is free (a name from before versioning may be
    `v3` already)."""
    top = service.gateway_policies.aggregate(top=Max("version"))["top"] or 0
    taken = set(service.gateway_policies.values_list("label", flat=True))
    version = top + 1
    while f"v{version}" in taken:
        version += 1
    return version, f"v{version}"


@transaction.atomic
def create_gateway_policy(
    service: Service, *, actor: Actor, document: Any, note: str = ""
) -> GatewayPolicy:
    """Record a new version of the service's gateway policy."""
    permissions.ensure_can_edit(actor, service.team)
    problems = document_problems(service, document)
    if problems:
        raise ValidationError({"document": problems})
    # The service row is the lock: two versions of one service never share a number.
    service = Service.objects.select_for_update().get(pk=service.pk)
    version, label = _next_version(service)
    return _record(service, actor=actor, version=version, label=label, document=document, note=note)


def _record(
    service: Service,
    *,
    actor: Actor,
    version: int,
    label: str,
    document: dict[str, Any] | None,
    note: str,
) -> GatewayPolicy:
    policy = GatewayPolicy.objects.create(
        service=service,
        version=version,
        label=label,
        document=document,
        sha256=policy_document.document_sha256(document),
        note=note,
        created_by=actor if actor is not None and actor.is_authenticated else None,
    )
    append_event(
        actor=actor,
        action="gateway_policy.created",
        subject=policy,
        subject_label=f"{service.slug} gateway policy {label}",
        payload=created_payload(policy),
    )
    return policy


def created_payload(policy: GatewayPolicy) -> dict[str, Any]:
    """What the `gateway_policy.created` Event of a version says."""
    return {
        "service": policy.service.slug,
        "version": policy.version,
        "label": policy.label,
        "known": policy.known,
        "sha256": policy.sha256,
        "document": policy.document,
        "note": policy.note,
    }


@transaction.atomic
def policy_named(
    service: Service, label: str, *, actor: Actor, note: str = NAMED_BY_A_REVISION
) -> GatewayPolicy:
    """The version of the service's policy a revision names by `label`.

    `v<n>` must exist. Any other name is a policy recorded by name only (how revisions
    named policies before they were versioned): its first use records an unknown
    version with `note`, which the production gate refuses until a version with a
    document replaces it.
    """
    try:
        validate_name_token(label)
        MaxLengthValidator(LABEL_MAX_LENGTH)(label)
    except ValidationError as exc:
        raise ValidationError({"gateway_policy_version": exc.messages}) from exc
    existing = GatewayPolicy.objects.filter(service=service, label=label).first()
    if existing is not None:
        return existing
    if VERSION_LABEL.match(label):
        labels = list(service.gateway_policies.order_by("version").values_list("label", flat=True))
        have = ", ".join(labels) if labels else "no version yet"
        raise ValidationError(
            {
                "gateway_policy_version": (
                    f"{service.slug} has no gateway policy {label} (it has {have}); record "
                    "the policy first on its gateway policy page."
                )
            }
        )
    permissions.ensure_can_edit(actor, service.team)
    service = Service.objects.select_for_update().get(pk=service.pk)
    existing = GatewayPolicy.objects.filter(service=service, label=label).first()
    if existing is not None:  # recorded while this waited for the lock
        return existing
    version, _ = _next_version(service)
    return _record(
        service,
        actor=actor,
        version=version,
        label=label,
        document=None,
        note=note,
    )


@transaction.atomic
def revision_running(
    policy: GatewayPolicy, *, actor: Actor, base: Revision | None = None
) -> Revision:
    """A revision of the service like `base` (its live one unless named) but running
    `policy`: the candidate of a policy change (a routing release), or of a release whose
    candidate changes its policy too. One already made is reused, so asking twice files
    no second copy."""
    service = Service.objects.select_related("live_revision").get(pk=policy.service_id)
    if base is None:
        base = service.live_revision
        if base is None:
            raise ValidationError(
                _("%(service)s has no live revision: a policy change needs one to start from.")
                % {"service": service.slug}
            )
    elif base.service_id != service.pk:
        raise ValueError(f"{base.label} is not a revision of {service.slug}")
    if base.gateway_policy_id == policy.pk:
        if base.pk == service.live_revision_id:
            raise ValidationError(
                _("%(label)s is already in force on %(service)s: there is nothing to release.")
                % {"label": policy.label, "service": service.slug}
            )
        return base
    existing = (
        Revision.objects.filter(
            service=service,
            gateway_policy=policy,
            model_asset_id=base.model_asset_id,
            runtime_id=base.runtime_id,
            context_limit=base.context_limit,
        )
        .order_by("-number")
        .first()
    )
    if existing is not None:
        return existing
    from ledger.services.registry import new_revision_from  # registry imports this module

    return new_revision_from(
        base,
        actor=actor,
        gateway_policy_version=policy.label,
        notes=f"{base.label} running gateway policy {policy.label}.",
    )
