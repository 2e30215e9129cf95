"""The release form and its state machine: file, edit, submit, withdraw, reopen, start.

draft → submitted → approved → rolling_out → released, or rejected, withdrawn,
aborted, rolled_back. Each transition is one verb here (sign-offs in
`releases.governance.services.signoffs`): it locks the release row (`select_for_update`),
refuses a state it does not apply to with `TransitionRefused` naming the
current one, writes, and appends its Event in the same transaction. Two
people pressing the same button apply it once: the second waits for the
lock, then finds the state moved on and is refused.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.utils import timezone
from django.utils.translation import gettext_noop

from ledger.chain import append_event
from ledger.models import Revision, Service, TaskType
from lib.actors import Actor
from releases import permissions, policy
from releases.governance import gates as release_gates
from releases.governance.services.base import approve, lock_release, refuse_unless
from releases.governance.services.errors import GatesNotPassed, TransitionRefused
from releases.governance.services.notify import notify_on_commit
from releases.governance.services.rollout import begin_stages
from releases.governance.services.signoffs import sync_signoffs
from releases.governance.snapshot import FORM_FIELDS, attname, form_values
from releases.models import Release, StandardChangeTemplate
from releases.schemas import validate_json_fields
from releases.transitions import Action
from replay.models import SampleSet

# Fields a filer sets; the ledger sets the rest (state, times, from-revision).
EDITABLE_FIELDS = tuple(name for name in FORM_FIELDS if name != "service")


def _lock_revision(revision_id: int) -> None:
    """Serialize with a registry edit of the revision: it is about to become locked."""
    list(Revision.objects.select_for_update().filter(pk=revision_id).values_list("pk"))


def _check_references(release: Release) -> None:
    """What the form names exists and belongs to the release's service (one query each)."""
    errors: dict[str, str] = {}
    service = release.service
    to_revision = release.to_revision
    if to_revision.service_id != service.pk:
        errors["to_revision"] = f"Revision {to_revision} is not a revision of {service.slug}."
    elif (
        to_revision.pk == service.live_revision_id
        and release.change_kind != Release.ChangeKind.DECOMMISSION
    ):
        errors["to_revision"] = (
            f"{to_revision.label} is already live on {service.slug}: "
            "name the candidate revision to release."
        )
    if release.rollback_target_id is not None:
        target = release.rollback_target
        if target is not None and target.service_id != service.pk:
            errors["rollback_target"] = f"Revision {target} is not a revision of {service.slug}."
    if release.impact_task_types and isinstance(release.impact_task_types, list):
        known = set(
            TaskType.objects.filter(slug__in=release.impact_task_types).values_list(
                "slug", flat=True
            )
        )
        unknown = [t for t in release.impact_task_types if t not in known]
        if unknown:
            errors["impact_task_types"] = f"Unknown task types: {', '.join(map(str, unknown))}."
    errors.update(_dismissal_errors(release))
    names = [*release.required_sample_sets]
    if release.rollback_verification_set:
        names.append(release.rollback_verification_set)
    if names:
        known = set(SampleSet.objects.filter(name__in=names).values_list("name", flat=True))
        unknown_sets = [n for n in release.required_sample_sets if n not in known]
        if unknown_sets:
            errors["required_sample_sets"] = (
                f"No sample set named {', '.join(map(str, unknown_sets))}."
            )
        if release.rollback_verification_set and release.rollback_verification_set not in known:
            errors["rollback_verification_set"] = (
                f"No sample set named {release.rollback_verification_set}."
            )
    template = release.standard_template
    if template is not None and template.retired_at is not None and release.is_draft:
        errors["standard_template"] = (
            f"Template {template} was retired on {template.retired_at:%Y-%m-%d}; "
            "pick a current one or the normal path."
        )
    if errors:
        raise ValidationError(errors)


def _dismissal_errors(release: Release) -> dict[str, str]:
    """A system is dismissed once, and never while ticked as touched."""
    systems = [d["system"] for d in release.impact_dismissed if isinstance(d, dict)]
    twice = sorted({s for s in systems if systems.count(s) > 1})
    if twice:
        return {"impact_dismissed": f"Dismissed more than once: {', '.join(twice)}."}
    both = [s for s in systems if s in release.impact_downstream]
    if both:
        return {
            "impact_dismissed": f"{', '.join(both)} both ticked as touched and dismissed: keep one."
        }
    return {}


def _validate(release: Release) -> None:
    validate_json_fields({name: getattr(release, name) for name in FORM_FIELDS})
    release.full_clean(exclude=["filed_by", "from_revision"])
    _check_references(release)


def _set(release: Release, name: str, value: Any) -> None:
    """A foreign key takes an object or its id (None clears it)."""
    field = Release._meta.get_field(name)
    if field.is_relation and not isinstance(value, models.Model):
        setattr(release, attname(name), value)
    else:
        setattr(release, name, value)


def _unknown_fields(fields: dict[str, Any]) -> None:
    unknown = sorted(set(fields) - set(EDITABLE_FIELDS))
    if unknown:
        raise ValidationError(
            {name: "This field cannot be set on a release form." for name in unknown}
        )


@transaction.atomic
def create_release(
    *,
    actor: Actor,
    service: Service,
    to_revision: Revision,
    change_kind: str,
    summary: str,
    filed_by: Any = None,
    **fields: Any,
) -> Release:
    """File a draft. Only service, to-revision, change kind and summary are needed;
    everything else can be filled in later. The from-revision is the live one."""
    permissions.ensure_can_file(actor, service)
    _unknown_fields(fields)
    filer = actor or filed_by
    if filer is None:
        raise ValidationError({"filed_by": "A release needs a filer: give filed_by."})
    release = Release(
        service=service,
        to_revision=to_revision,
        change_kind=change_kind,
        summary=summary,
        from_revision_id=service.live_revision_id,
        filed_by=filer,
    )
    for name, value in fields.items():
        _set(release, name, value)
    _validate(release)
    release.save(force_insert=True)
    append_event(
        actor=actor,
        action="release.filed",
        subject=release,
        payload={"after": form_values(release), "from_revision": release.from_revision_id},
    )
    return release


@transaction.atomic
def update_release(release: Release, *, actor: Actor, **changes: Any) -> bool:
    """Change the form. Returns False, writing nothing, when nothing changed.

    Allowed until the rollout starts; a change after submission voids the
    sign-offs it touches (the snapshot they were bound to moved) and an
    approved release goes back to submitted until they are given again.
    """
    _unknown_fields(changes)
    release = lock_release(release)
    permissions.ensure_can_edit(actor, release)
    refuse_unless(release, Action.EDIT)
    if not release.is_draft and "to_revision" in changes:
        target = changes["to_revision"]
        if getattr(target, "pk", target) != release.to_revision_id:
            raise ValidationError(
                {
                    "to_revision": "The candidate is what was submitted: it changes only "
                    "while a draft. Withdraw this release and file a new one."
                }
            )
    before = form_values(release)
    for name, value in changes.items():
        _set(release, name, value)
    if release.is_draft:
        # While drafting, the from-revision follows what is live.
        release.from_revision_id = release.service.live_revision_id
    after = form_values(release)
    changed = [name for name in FORM_FIELDS if before.get(name) != after.get(name)]
    if not changed:
        return False
    _validate(release)
    release.save(update_fields=[*changed, "from_revision", "updated_at"])
    append_event(
        actor=actor,
        action="release.updated",
        subject=release,
        payload={
            "before": {n: before.get(n) for n in changed},
            "after": {n: after.get(n) for n in changed},
        },
    )
    if not release.is_draft:
        sync_signoffs(release, actor=actor)
    return True


def _gates_or_refuse(
    release: Release, *, but: frozenset[str], doing: str
) -> release_gates.Assessment:
    assessment = release_gates.assess(release)
    failing = assessment.failing(but=but)
    if failing:
        keys = ", ".join(g["key"] for g in failing)
        raise GatesNotPassed(
            f"Release #{release.pk} cannot be {doing}: these gates neither pass nor are "
            f"waived: {keys}.",
            failing,
        )
    return assessment


@transaction.atomic
def submit_release(release: Release, *, actor: Actor) -> Release:
    """draft → submitted, once every gate but sign-offs passes or is waived.

    A release that needs no sign-off (experimental) goes on to approved. The
    signers of the roles awaited are emailed after commit.
    """
    release = lock_release(release)
    permissions.ensure_can_edit(actor, release)
    refuse_unless(release, Action.SUBMIT)
    _lock_revision(release.to_revision_id)
    if release.rollback_target_id:
        _lock_revision(release.rollback_target_id)
    assessment = _gates_or_refuse(release, but=frozenset({"signoffs"}), doing="submitted")
    now = timezone.now()
    release.state = Release.State.SUBMITTED
    release.submitted_at = now
    release.save(update_fields=["state", "submitted_at", "updated_at"])
    append_event(
        actor=actor,
        action="release.submitted",
        subject=release,
        payload={
            "snapshot_hash": assessment.snapshot_hash,
            "gates": {g["key"]: g["status"] for g in assessment.gates},
            "waivers": [w.pk for w in assessment.waivers],
        },
    )
    required = assessment.required_roles
    if not required:
        approve(release, actor=actor, why="no sign-off is required for this tier")
    else:
        notify_on_commit(
            release, required, why=gettext_noop("It was submitted and awaits your sign-off.")
        )
    return release


@transaction.atomic
def withdraw_release(release: Release, *, actor: Actor, reason: str = "") -> Release:
    """draft, submitted or approved → withdrawn (the filer's team takes it back)."""
    release = lock_release(release)
    permissions.ensure_can_edit(actor, release)
    refuse_unless(release, Action.WITHDRAW)
    before = release.state
    release.state = Release.State.WITHDRAWN
    release.closed_at = timezone.now()
    release.save(update_fields=["state", "closed_at", "updated_at"])
    append_event(
        actor=actor,
        action="release.withdrawn",
        subject=release,
        payload={"from_state": before, "reason": reason},
    )
    return release


@transaction.atomic
def reopen_release(release: Release, *, actor: Actor) -> Release:
    """A rejected or withdrawn release comes back as a new draft copy of its form."""
    release = lock_release(release)
    permissions.ensure_can_file(actor, release.service)
    refuse_unless(release, Action.REOPEN)
    attnames = [attname(name) for name in FORM_FIELDS]
    values = {attname: getattr(release, attname) for attname in attnames}
    copy = Release(
        **values,
        from_revision_id=release.service.live_revision_id,
        filed_by=actor or release.filed_by,
        reopened_from=release,
    )
    template = copy.standard_template
    if template is not None and template.retired_at is not None:
        copy.standard_template = None
        copy.path = Release.Path.NORMAL
    copy.save(force_insert=True)
    append_event(
        actor=actor,
        action="release.reopened",
        subject=copy,
        payload={"reopened_from": release.pk, "after": form_values(copy)},
    )
    return copy


def signoffs_due_at(now: dt.datetime) -> dt.datetime:
    return now + dt.timedelta(hours=settings.RELEASES_EMERGENCY_SIGNOFF_HOURS)


def early_start(release: Release, now: dt.datetime) -> dt.datetime | None:
    """The planned start, when starting at `now` would be early (beyond
    `policy.EARLY_START_TOLERANCE`); None when on time, unplanned, or on the emergency
    path (which starts when the incident needs it)."""
    planned = release.planned_start
    if planned is None or release.path == Release.Path.EMERGENCY:
        return None
    return planned if now < planned - policy.EARLY_START_TOLERANCE else None


@transaction.atomic
def start_rollout(
    release: Release,
    *,
    actor: Actor,
    started_at: dt.datetime | None = None,
    early_reason: str = "",
) -> Release:
    """approved → rolling_out, stage 1 of the gray plan carrying traffic; on the
    emergency path, submitted → rolling_out too.

    Outside blackout windows only, except on the emergency path. An emergency
    release that starts before its sign-offs gets them due within
    RELEASES_EMERGENCY_SIGNOFF_HOURS of its start, flagged as overdue after.
    `started_at` records an emergency rollout begun before it could be recorded
    (during an incident); it cannot lie in the future. Starting before the planned
    start (`early_start`) needs `early_reason`, kept in the event.
    """
    release = lock_release(release)
    permissions.ensure_can_start_rollout(actor, release)
    emergency = release.path == Release.Path.EMERGENCY
    refuse_unless(release, Action.START_ROLLOUT)
    now = timezone.now()
    if started_at is not None:
        if not emergency:
            raise ValidationError(
                {"started_at": "Only an emergency rollout may be recorded after it began."}
            )
        if started_at > now:
            raise ValidationError({"started_at": "A rollout cannot start in the future."})
        now = started_at
    planned = early_start(release, now)
    if planned is not None and not early_reason.strip():
        raise ValidationError(
            {
                "early_reason": f"Release #{release.pk} is planned to start at "
                f"{timezone.localtime(planned):%Y-%m-%d %H:%M %Z}: say why it starts early."
            }
        )
    skip = frozenset({"signoffs", "blackout"}) if emergency else frozenset({"blackout"})
    assessment = _gates_or_refuse(release, but=skip, doing="rolled out")
    if not emergency:
        windows = release_gates.load_inputs(release, now=now).windows
        found = release_gates.blackout_at(windows, now)
        if found is not None:
            window, (_, ends) = found
            raise TransitionRefused(
                f"Release #{release.pk} cannot start now: blackout window '{window.name}' runs "
                f"until {ends:%Y-%m-%d %H:%M %Z}; only the emergency path may start inside it.",
                state=release.state,
            )
    release.state = Release.State.ROLLING_OUT
    release.rollout_started_at = now
    fields = ["state", "rollout_started_at", "updated_at"]
    signoffs_gate = assessment.gate("signoffs")
    if emergency and signoffs_gate is not None and signoffs_gate["status"] != "pass":
        release.signoffs_due_at = signoffs_due_at(now)
        fields.append("signoffs_due_at")
    release.save(update_fields=fields)
    append_event(
        actor=actor,
        action="release.rollout_started",
        subject=release,
        payload={
            "snapshot_hash": assessment.snapshot_hash,
            "path": release.path,
            "signoffs_due_at": release.signoffs_due_at,
            "planned_start": release.planned_start,
            "early_reason": early_reason.strip() if planned is not None else "",
        },
    )
    begin_stages(release, actor=actor, now=now)
    return release


def usable_template(key: str) -> StandardChangeTemplate | None:
    """The newest unretired version of a standard change template."""
    return StandardChangeTemplate.objects.usable().filter(key=key).order_by("-version").first()


__all__ = [
    "EDITABLE_FIELDS",
    "create_release",
    "early_start",
    "reopen_release",
    "signoffs_due_at",
    "start_rollout",
    "submit_release",
    "update_release",
    "usable_template",
    "withdraw_release",
]
