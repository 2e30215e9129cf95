"""The registry's verbs. Every change to what the ledger says goes through here.

Each verb validates, writes its rows and appends the Event in one
transaction; views, the API, admin, commands and tasks call these and never
write registry rows themselves. `actor=None` is the system (commands).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.db.models import Max
from django.utils import timezone
from django.utils.translation import gettext as _

from ledger import locks, permissions
from ledger.chain import NewEvent, append_event, append_events
from ledger.engines import check_launch_parameters
from ledger.fingerprint import compute_fingerprint
from ledger.models import (
    Capability,
    License,
    ModelAsset,
    Revision,
    Runtime,
    Service,
    TaskType,
    Team,
)
from ledger.services import gateway_policies
from ledger.validators import parse_image, unpinned_image_message
from lib.actors import Actor

if TYPE_CHECKING:
    from django.contrib.auth.models import User

# Fields that may still change once an object is locked: governance state, not content.
MUTABLE_WHEN_LOCKED: dict[type[models.Model], set[str]] = {
    ModelAsset: {"lifecycle", "deprecated_on", "retired_on", "license_approval", "model_card_url"},
    Runtime: set(),
    Revision: {"notes"},
}


__all__ = [
    "CAPABILITY_EXAMPLES",
    "CAPABILITY_SCHEMAS",
    "DEFAULT_LICENSE_KIND",
    "MUTABLE_WHEN_LOCKED",
    "PROTECTED_FIELDS",
    "add_team_member",
    "check_revision",
    "create_license",
    "create_revision",
    "create_runtime",
    "create_service",
    "create_team",
    "declare_capability",
    "deprecate_asset",
    "lifecycle_refusal",
    "live_revision_changed",
    "new_revision_from",
    "record_capability_check",
    "register_asset",
    "remove_team_member",
    "retire_asset",
    "runtime_warnings",
    "set_live_revision",
    "snapshot",
    "update_asset",
    "update_revision",
    "update_runtime",
    "update_service",
    "validate_capability_value",
]

# ---------------------------------------------------------------- helpers


def _value_of(obj: models.Model, name: str) -> Any:
    field = obj._meta.get_field(name)
    if field.many_to_many:
        return sorted(str(item) for item in getattr(obj, name).all()) if obj.pk else []
    if isinstance(field, models.Field) and field.is_relation:  # a reverse relation has no attname
        return getattr(obj, field.attname)
    return getattr(obj, name)


def snapshot(obj: models.Model, names: Iterable[str]) -> dict[str, Any]:
    return {name: _value_of(obj, name) for name in names}


def _editable_fields(model: type[models.Model]) -> list[str]:
    return [
        f.name
        for f in model._meta.get_fields()
        if f.concrete and not f.auto_created and f.name not in {"created_at", "updated_at"}
    ]


# Fields only their own verb may set (set_live_revision, create_revision, …).
PROTECTED_FIELDS: dict[type[models.Model], set[str]] = {
    Service: {"live_revision"},
    Revision: {"service", "number", "served_at", "fingerprint", "created_by", "based_on"},
}


def _guard(model: type[models.Model], changes: dict[str, Any]) -> None:
    protected = PROTECTED_FIELDS.get(model, set()) & set(changes)
    if protected:
        raise ValidationError(
            {name: "This field is set by the ledger itself." for name in sorted(protected)}
        )


def _create(
    obj: models.Model,
    *,
    actor: Actor,
    action: str,
    extra: dict | None = None,
    m2m: dict | None = None,
):
    obj.full_clean()
    obj.save(force_insert=True)
    for name, values in (m2m or {}).items():
        getattr(obj, name).set(values)
    payload = {"after": snapshot(obj, [*_editable_fields(type(obj)), *(m2m or {})])}
    if extra:
        payload.update(extra)
    append_event(actor=actor, action=action, subject=obj, payload=payload)
    return obj


def _update(
    obj: models.Model,
    changes: dict[str, Any],
    *,
    actor: Actor,
    action: str,
    m2m: dict | None = None,
    extra: dict | None = None,
) -> bool:
    """Apply changes; append an event with before/after of what really changed.

    Returns False, writing nothing, when nothing changed: applying the same
    document twice must leave the chain as it was.
    """
    unknown = set(changes) - set(_editable_fields(type(obj)))
    if unknown:
        raise ValidationError(
            {name: "This field cannot be changed here." for name in sorted(unknown)}
        )
    m2m = m2m or {}
    before = snapshot(obj, [*changes, *m2m])
    for name, value in changes.items():
        setattr(obj, name, value)
    m2m_after = {name: sorted(str(item) for item in values) for name, values in m2m.items()}
    after = {**snapshot(obj, changes), **m2m_after}
    changed = [name for name in after if after[name] != before[name]]
    if not changed:
        return False
    _refuse_if_locked(obj, changed)
    obj.full_clean()
    scalar = [name for name in changed if name not in m2m]
    if scalar:
        update_fields = [*scalar, *(["updated_at"] if hasattr(obj, "updated_at") else [])]
        obj.save(update_fields=update_fields)
    for name, values in m2m.items():
        if name in changed:
            getattr(obj, name).set(values)
    append_event(
        actor=actor,
        action=action,
        subject=obj,
        payload={
            "before": {n: before[n] for n in changed},
            "after": {n: after[n] for n in changed},
            **(extra or {}),
        },
    )
    return True


def _lock_row(model: type[models.Model], pk: Any) -> None:
    """Hold a registry row until commit, so a lock reason that appears meanwhile
    (it goes live, a release past draft takes it) waits for this change or is seen by it."""
    list(model._default_manager.select_for_update().filter(pk=pk).values_list("pk"))


def _refuse_if_locked(obj: models.Model, names: Iterable[str]) -> None:
    mutable = MUTABLE_WHEN_LOCKED.get(type(obj))
    if mutable is None:
        return
    locked_fields = set(names) - mutable
    if not locked_fields:
        return
    _lock_row(type(obj), obj.pk)
    reasons = locks.reasons_for(obj)  # what each model's lock_reasons() answers
    if reasons:
        raise ValidationError(
            {
                name: f"{obj} can no longer change ({'; '.join(reasons)}). Make a new revision instead."
                for name in sorted(locked_fields)
            },
            code="locked",
        )


def _task_types(slugs: Iterable[str | TaskType], *, actor: Actor) -> list[TaskType]:
    """The task types named; a new slug becomes a task type, recorded like any change."""
    result = []
    for item in slugs:
        if isinstance(item, TaskType):
            result.append(item)
            continue
        task_type = TaskType.objects.filter(slug=item).first()
        if task_type is None:
            task_type = _create(
                TaskType(slug=item, name=item.replace("-", " ")),
                actor=actor,
                action="task_type.created",
            )
        result.append(task_type)
    return result


def _refresh_fingerprints(revisions: models.QuerySet[Revision], *, actor: Actor) -> None:
    """An asset or runtime changed: the revisions built on it now have another fingerprint."""
    for revision in revisions.select_related("model_asset", "runtime", "gateway_policy"):
        fingerprint = compute_fingerprint(
            revision.model_asset, revision.runtime, revision.context_limit, revision.gateway_policy
        )
        if fingerprint != revision.fingerprint:
            _update(
                revision,
                {"fingerprint": fingerprint},
                actor=actor,
                action="revision.fingerprint_changed",
            )


# ---------------------------------------------------------------- teams and licenses


@transaction.atomic
def create_team(*, actor: Actor, slug: str, name: str, members: Iterable[User] = ()) -> Team:
    permissions.ensure_can_manage_teams(
        actor, refusal=_("Only an administrator can create a team.")
    )
    team = _create(Team(slug=slug, name=name), actor=actor, action="team.created")
    if members:
        team.members.add(*members)
        append_event(
            actor=actor,
            action="team.members_added",
            subject=team,
            payload={"members": sorted(m.get_username() for m in members)},
        )
    return team


@transaction.atomic
def add_team_member(team: Team, user: User, *, actor: Actor, source: str = "") -> None:
    permissions.ensure_can_manage_teams(
        actor, refusal=_("Only an administrator can change team membership.")
    )
    team.members.add(user)
    append_event(
        actor=actor,
        action="team.members_added",
        subject=team,
        payload={"members": [user.get_username()], **({"source": source} if source else {})},
    )


@transaction.atomic
def remove_team_member(team: Team, user: User, *, actor: Actor, source: str = "") -> None:
    """Take the person out of the team (the identity provider's groups no longer put them
    in it); `source` names what decided it when not a person."""
    permissions.ensure_can_manage_teams(
        actor, refusal=_("Only an administrator can change team membership.")
    )
    team.members.remove(user)
    append_event(
        actor=actor,
        action="team.members_removed",
        subject=team,
        payload={"members": [user.get_username()], **({"source": source} if source else {})},
    )


DEFAULT_LICENSE_KIND = {
    "Apache-2.0": License.Kind.PERMISSIVE,
    "MIT": License.Kind.PERMISSIVE,
    "BSD-3-Clause": License.Kind.PERMISSIVE,
    "GPL-3.0-only": License.Kind.COPYLEFT,
    "AGPL-3.0-only": License.Kind.COPYLEFT,
    "CC-BY-NC-4.0": License.Kind.NON_COMMERCIAL,
    "CC-BY-NC-SA-4.0": License.Kind.NON_COMMERCIAL,
}


@transaction.atomic
def create_license(
    *,
    actor: Actor,
    spdx_id: str,
    name: str,
    kind: str | None = None,
    gated: bool = False,
    terms_url: str = "",
) -> License:
    # ensure_can_approve_licenses lets the system (None) and superusers through.
    permissions.ensure_can_approve_licenses(actor)
    kind = kind or DEFAULT_LICENSE_KIND.get(spdx_id)
    if kind is None:
        raise ValidationError(
            {
                "kind": "Say how this license is classed: permissive, copyleft, "
                "non_commercial or acceptable_use."
            }
        )
    return _create(
        License(spdx_id=spdx_id, name=name, kind=kind, gated=gated, terms_url=terms_url),
        actor=actor,
        action="license.created",
    )


# ---------------------------------------------------------------- services


def _ensure_can_move(
    actor: Actor, obj: Service | ModelAsset | Runtime, changes: dict[str, Any]
) -> None:
    """Moving an object to another team needs the right in both teams."""
    permissions.ensure_can_edit(actor, obj.team)
    target = changes.get("team")
    if target is not None and target != obj.team:
        permissions.ensure_can_edit(actor, target)


@transaction.atomic
def create_service(
    *, actor: Actor, task_types: Iterable[str | TaskType] = (), **fields: Any
) -> Service:
    service = Service(**fields)
    if service.team_id:
        permissions.ensure_can_edit(actor, service.team)
    return _create(
        service,
        actor=actor,
        action="service.created",
        m2m={"task_types": _task_types(task_types, actor=actor)},
    )


@transaction.atomic
def update_service(
    service: Service,
    *,
    actor: Actor,
    task_types: Iterable[str | TaskType] | None = None,
    **changes: Any,
) -> bool:
    _ensure_can_move(actor, service, changes)
    _guard(Service, changes)
    m2m = {"task_types": _task_types(task_types, actor=actor)} if task_types is not None else None
    return _update(service, changes, actor=actor, action="service.updated", m2m=m2m)


@transaction.atomic
def set_live_revision(
    service: Service,
    revision: Revision,
    *,
    actor: Actor,
    reason: str = "",
    cause: dict[str, Any] | None = None,
) -> None:
    """Point the service at a revision; the first time a revision serves, it is frozen.

    `cause` names what set it, e.g. ``{"release": 12}`` or ``{"rollback": 3}``; with the
    revision's fingerprint it goes into the Event, from which the serving history is read
    (`ledger.queries.serving`). A release or rollback verb, which checked its own
    permission, names itself as the cause; a direct change needs the set-live one.
    """
    service = Service.objects.select_for_update().get(pk=service.pk)
    if not cause:
        permissions.ensure_can_set_live(actor, service)
    if revision.service_id != service.pk:
        raise ValidationError({"live_revision": f"{revision} belongs to another service."})
    before = service.live_revision_id
    if before == revision.pk:
        return
    # Serving freezes the revision and its parts: wait for any change of them in
    # flight (the update verbs hold these rows), in the order they take them.
    _lock_row(ModelAsset, revision.model_asset_id)
    _lock_row(Runtime, revision.runtime_id)
    _lock_row(Revision, revision.pk)
    Service.objects.filter(pk=service.pk).update(live_revision=revision, updated_at=timezone.now())
    if revision.served_at is None:
        Revision.objects.filter(pk=revision.pk, served_at__isnull=True).update(
            served_at=timezone.now()
        )
    append_events([live_revision_changed(service, before, revision, reason, cause)], actor=actor)


def live_revision_changed(
    service: Service,
    before: int | None,
    revision: Revision,
    reason: str = "",
    cause: dict[str, Any] | None = None,
) -> NewEvent:
    """The event `set_live_revision` appends, from which the serving history is read
    (the benchmark fleet's history is seeded with the same)."""
    return NewEvent(
        action="service.live_revision_changed",
        subject=service,
        payload={
            "before": {"live_revision": before},
            "after": {"live_revision": revision.pk},
            "reason": reason,
            "cause": cause or {},
            "fingerprint": revision.fingerprint,
        },
    )


# ---------------------------------------------------------------- model assets


@transaction.atomic
def register_asset(*, actor: Actor, **fields: Any) -> ModelAsset:
    asset = ModelAsset(**fields)
    if asset.team_id:
        permissions.ensure_can_edit(actor, asset.team)
    if asset.derived_from_id and asset.derivation == ModelAsset.Derivation.BASE:
        raise ValidationError(
            {
                "derivation": "An asset derived from another says how: quantized, merged or fine-tuned."
            }
        )
    return _create(asset, actor=actor, action="model_asset.registered")


@transaction.atomic
def update_asset(asset: ModelAsset, *, actor: Actor, **changes: Any) -> bool:
    _ensure_can_move(actor, asset, changes)
    if "license_approval" in changes and changes["license_approval"] != asset.license_approval:
        permissions.ensure_can_approve_licenses(actor)
    elif changes.get("license", asset.license) != asset.license:
        # A review approved or rejected the old license; the new one awaits its own.
        changes["license_approval"] = ModelAsset.LicenseApproval.PENDING
    changed = _update(asset, changes, actor=actor, action="model_asset.updated")
    if changed:
        _refresh_fingerprints(asset.revisions.all(), actor=actor)
    return changed


def lifecycle_refusal(asset: ModelAsset, *, retire: bool) -> str:
    """Why the asset cannot be deprecated (or, with `retire`, retired) now; empty when it can.

    The confirmation page asks this before offering the button; `deprecate_asset`
    itself refuses a retired asset, whoever calls it.
    """
    if asset.lifecycle == ModelAsset.Lifecycle.RETIRED:
        return _("%(asset)s was retired on %(date)s; it cannot change lifecycle again.") % {
            "asset": asset,
            "date": f"{asset.retired_on:%Y-%m-%d}",
        }
    if not retire and asset.lifecycle == ModelAsset.Lifecycle.DEPRECATED:
        return _("%(asset)s is already deprecated since %(date)s.") % {
            "asset": asset,
            "date": f"{asset.deprecated_on:%Y-%m-%d}",
        }
    return ""


def _lock_lifecycle(asset: ModelAsset) -> None:
    """Take the asset's row lock and read its lifecycle as stored, so two concurrent
    lifecycle changes apply one after the other, each seeing the other's result."""
    asset.refresh_from_db(
        from_queryset=ModelAsset.objects.select_for_update(),
        fields=["lifecycle", "deprecated_on", "retired_on"],
    )


@transaction.atomic
def deprecate_asset(asset: ModelAsset, *, actor: Actor, on: dt.date | None = None) -> bool:
    """Mark an active (or deprecated) asset deprecated; a retired one stays retired."""
    permissions.ensure_can_edit(actor, asset.team)
    _lock_lifecycle(asset)
    if asset.lifecycle == ModelAsset.Lifecycle.RETIRED:
        raise ValidationError({"lifecycle": lifecycle_refusal(asset, retire=False)}, code="retired")
    changes = {
        "lifecycle": ModelAsset.Lifecycle.DEPRECATED,
        "deprecated_on": on or timezone.localdate(),
    }
    return _update(asset, changes, actor=actor, action="model_asset.deprecated")


@transaction.atomic
def retire_asset(asset: ModelAsset, *, actor: Actor, on: dt.date | None = None) -> bool:
    permissions.ensure_can_edit(actor, asset.team)
    _lock_lifecycle(asset)
    today = on or timezone.localdate()
    changes = {
        "lifecycle": ModelAsset.Lifecycle.RETIRED,
        "retired_on": today,
        "deprecated_on": asset.deprecated_on or today,
    }
    return _update(asset, changes, actor=actor, action="model_asset.retired")


# ---------------------------------------------------------------- runtimes


def _check_runtime_parameters(runtime: Runtime, context_limit: int | None = None) -> list[str]:
    check = check_launch_parameters(
        runtime.engine, runtime.launch_parameters, context_limit=context_limit
    )
    if check.errors:
        raise ValidationError(
            {
                "launch_parameters": [
                    f"{name}: {problem}" if name else problem
                    for name, problem in check.errors.items()
                ]
            }
        )
    return check.warnings


def runtime_warnings(runtime: Runtime) -> list[str]:
    """What a model owner should know about a runtime that is still accepted."""
    warnings = list(check_launch_parameters(runtime.engine, runtime.launch_parameters).warnings)
    try:
        if not parse_image(runtime.image).pinned:
            warnings.append(
                unpinned_image_message(runtime.image) + " Production services refuse it."
            )
    except ValidationError:
        pass
    return warnings


@transaction.atomic
def create_runtime(*, actor: Actor, **fields: Any) -> Runtime:
    runtime = Runtime(**fields)
    if runtime.team_id:
        permissions.ensure_can_edit(actor, runtime.team)
    _check_runtime_parameters(runtime)
    return _create(runtime, actor=actor, action="runtime.created")


@transaction.atomic
def update_runtime(runtime: Runtime, *, actor: Actor, **changes: Any) -> bool:
    _ensure_can_move(actor, runtime, changes)
    candidate = Runtime(
        **{
            **{f: getattr(runtime, f) for f in ("engine", "launch_parameters")},
            **{k: v for k, v in changes.items() if k in ("engine", "launch_parameters")},
        }
    )
    _check_runtime_parameters(candidate)
    changed = _update(runtime, changes, actor=actor, action="runtime.updated")
    if changed:
        _refresh_fingerprints(runtime.revisions.all(), actor=actor)
    return changed


# ---------------------------------------------------------------- revisions


def check_revision(
    service: Service, asset: ModelAsset, runtime: Runtime, context_limit: int | None
) -> None:
    """Refuse parts a revision of `service` may not combine, keyed by field.

    Writes nothing: `create_revision` and `update_revision` run it, and the
    revision form runs it as the user types.
    """
    errors: dict[str, list[str]] = {}
    refusal = permissions.asset_refusal(service, asset)
    if refusal:
        errors.setdefault("model_asset", []).append(refusal)
    if service.tier == Service.Tier.PRODUCTION:
        try:
            pinned = parse_image(runtime.image).pinned
        except ValidationError:
            pinned = False
        if not pinned:
            errors.setdefault("runtime", []).append(
                f"Production services need an image pinned by digest. {unpinned_image_message(runtime.image)}"
            )
    if context_limit:
        check = check_launch_parameters(
            runtime.engine, runtime.launch_parameters, context_limit=context_limit
        )
        for name, problem in check.errors.items():
            target = "context_limit" if "context limit" in problem else "runtime"
            errors.setdefault(target, []).append(f"runtime {runtime.name}: {name} {problem}")
    if errors:
        raise ValidationError(errors)


@transaction.atomic
def create_revision(
    service: Service,
    *,
    actor: Actor,
    model_asset: ModelAsset,
    runtime: Runtime,
    context_limit: int,
    gateway_policy_version: str,
    notes: str = "",
    based_on: Revision | None = None,
) -> Revision:
    permissions.ensure_can_edit(actor, service.team)
    # Lock the service row so two revisions of one service never get the same number.
    service = Service.objects.select_for_update().get(pk=service.pk)
    check_revision(service, model_asset, runtime, context_limit)
    policy = gateway_policies.policy_named(service, gateway_policy_version, actor=actor)
    number = (service.revisions.aggregate(top=Max("number"))["top"] or 0) + 1
    revision = Revision(
        service=service,
        number=number,
        model_asset=model_asset,
        runtime=runtime,
        context_limit=context_limit,
        gateway_policy=policy,
        notes=notes,
        based_on=based_on,
        created_by=actor if actor is not None and actor.is_authenticated else None,
        fingerprint=compute_fingerprint(model_asset, runtime, context_limit, policy),
    )
    return _create(
        revision,
        actor=actor,
        action="revision.created",
        extra={"fingerprint": revision.fingerprint, "gateway_policy_version": policy.label},
    )


@transaction.atomic
def new_revision_from(revision: Revision, *, actor: Actor, **overrides: Any) -> Revision:
    """'New revision from this one': the same parts, with the given ones replaced, and
    the same capabilities, declared again (a verification holds for the revision it
    checked, not for its copy). A capability the new parts no longer allow (a context
    length above a lowered context limit) is left behind; `queries.capabilities_left_behind`
    names it."""
    fields: dict[str, Any] = {
        "model_asset": revision.model_asset,
        "runtime": revision.runtime,
        "context_limit": revision.context_limit,
        "gateway_policy_version": revision.gateway_policy_version,
        "notes": revision.notes,
    }
    fields.update(overrides)
    successor = create_revision(revision.service, actor=actor, based_on=revision, **fields)
    for capability in Capability.objects.filter(revision=revision).order_by("kind"):
        try:
            validate_capability_value(
                capability.kind, capability.value, context_limit=successor.context_limit
            )
        except ValidationError:
            continue
        _create(
            Capability(revision=successor, kind=capability.kind, value=capability.value),
            actor=actor,
            action="capability.declared",
            extra={"copied_from": revision.label},
        )
    return successor


@transaction.atomic
def update_revision(revision: Revision, *, actor: Actor, **changes: Any) -> bool:
    permissions.ensure_can_edit(actor, revision.service.team)
    _guard(Revision, changes)
    if "gateway_policy_version" in changes:
        label = changes.pop("gateway_policy_version")
        changes["gateway_policy"] = gateway_policies.policy_named(
            revision.service, label, actor=actor
        )
    _refuse_if_locked(
        revision,
        [
            name
            for name, value in changes.items()
            if _value_of(revision, name) != (value.pk if isinstance(value, models.Model) else value)
        ],
    )
    asset = changes.get("model_asset", revision.model_asset)
    runtime = changes.get("runtime", revision.runtime)
    context_limit = changes.get("context_limit", revision.context_limit)
    policy = changes.get("gateway_policy", revision.gateway_policy)
    if set(changes) & {"model_asset", "runtime", "context_limit", "gateway_policy"}:
        check_revision(revision.service, asset, runtime, context_limit)
        changes["fingerprint"] = compute_fingerprint(asset, runtime, context_limit, policy)
    return _update(revision, changes, actor=actor, action="revision.updated")


# ---------------------------------------------------------------- capabilities

_POSITIVE_INT = {"type": "integer", "minimum": 1}
CAPABILITY_SCHEMAS: dict[str, dict] = {
    Capability.Kind.CONTEXT_LENGTH: _POSITIVE_INT,
    Capability.Kind.MAX_CONCURRENCY: _POSITIVE_INT,
    Capability.Kind.RECOMMENDED_BATCH: _POSITIVE_INT,
    Capability.Kind.STREAMING: {"enum": ["sse", "websocket", "grpc", "none"]},
    Capability.Kind.STRUCTURED_OUTPUT: {
        "type": "array",
        "uniqueItems": True,
        "items": {"enum": ["json_schema", "json_object", "regex", "grammar", "choice"]},
    },
    Capability.Kind.TOOL_CALLING: {"type": "boolean"},
    Capability.Kind.TASK_TYPES: {
        "type": "array",
        "uniqueItems": True,
        "items": {"type": "string", "minLength": 1},
    },
    Capability.Kind.ERROR_CODES: {"type": "object", "additionalProperties": {"type": "string"}},
    Capability.Kind.METRICS: {
        "type": "array",
        "uniqueItems": True,
        "items": {"type": "string", "minLength": 1},
    },
    Capability.Kind.ROLLBACK_METHOD: {
        "enum": ["redeploy_previous", "traffic_shift", "gateway_policy", "model_swap"]
    },
}
CAPABILITY_EXAMPLES: dict[str, str] = {
    Capability.Kind.CONTEXT_LENGTH: "32768",
    Capability.Kind.MAX_CONCURRENCY: "64",
    Capability.Kind.RECOMMENDED_BATCH: "16",
    Capability.Kind.STREAMING: '"sse"',
    Capability.Kind.STRUCTURED_OUTPUT: '["json_schema", "regex"]',
    Capability.Kind.TOOL_CALLING: "true",
    Capability.Kind.TASK_TYPES: '["chat", "rag"]',
    Capability.Kind.ERROR_CODES: '{"429": "rate limited, retry after"}',
    Capability.Kind.METRICS: '["vllm:num_requests_running", "vllm:gpu_cache_usage_perc"]',
    Capability.Kind.ROLLBACK_METHOD: '"traffic_shift"',
}


def validate_capability_value(kind: str, value: Any, *, context_limit: int | None = None) -> None:
    schema = CAPABILITY_SCHEMAS.get(kind)
    if schema is None:
        raise ValidationError(
            {
                "kind": f"Unknown capability {kind!r}; expected one of {', '.join(CAPABILITY_SCHEMAS)}."
            }
        )
    import jsonschema  # over a second to import: only where a capability is checked

    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError as exc:
        raise ValidationError(
            {"value": f"{kind}: {exc.message}. Example: {CAPABILITY_EXAMPLES[kind]}"}
        ) from exc
    if kind == Capability.Kind.CONTEXT_LENGTH and context_limit and value > context_limit:
        raise ValidationError(
            {
                "value": f"context_length {value} exceeds the revision's context limit "
                f"of {context_limit} tokens."
            }
        )


@transaction.atomic
def declare_capability(revision: Revision, *, actor: Actor, kind: str, value: Any) -> Capability:
    """Declare (or re-declare) one capability; a changed value must be verified again."""
    permissions.ensure_can_edit(actor, revision.service.team)
    validate_capability_value(kind, value, context_limit=revision.context_limit)
    existing = Capability.objects.select_for_update().filter(revision=revision, kind=kind).first()
    if existing is None:
        return _create(
            Capability(revision=revision, kind=kind, value=value),
            actor=actor,
            action="capability.declared",
        )
    if existing.value == value:
        return existing
    reasons = revision.lock_reasons()
    if reasons:
        raise ValidationError(
            {
                "value": f"{revision} can no longer change ({'; '.join(reasons)}). "
                "Make a new revision instead."
            }
        )
    _update(
        existing,
        {
            "value": value,
            "status": Capability.Status.DECLARED,
            "verified_fingerprint": "",
            "verified_at": None,
            "evidence": {},
        },
        actor=actor,
        action="capability.declared",
    )
    return existing


@transaction.atomic
def record_capability_check(
    capability: Capability, *, actor: Actor, passed: bool, evidence: dict
) -> Capability:
    """A probe's verdict: verified (bound to the revision's fingerprint) or failed, with what was seen."""
    capability = (
        Capability.objects.select_for_update().select_related("revision").get(pk=capability.pk)
    )
    status = Capability.Status.VERIFIED if passed else Capability.Status.FAILED
    _update(
        capability,
        {
            "status": status,
            "verified_at": timezone.now(),
            "evidence": evidence,
            "verified_fingerprint": capability.revision.fingerprint if passed else "",
        },
        actor=actor,
        action=f"capability.{status}",
    )
    return capability
