"""The calendar: standard change templates and blackout windows."""

from __future__ import annotations

import datetime as dt

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from ledger.chain import append_event
from ledger.models import Service
from lib.actors import Actor
from releases import permissions
from releases.governance.services.errors import TransitionRefused
from releases.models import BlackoutWindow, Release, StandardChangeTemplate


@transaction.atomic
def create_standard_template(
    *,
    actor: Actor,
    key: str,
    title: str,
    tier: str,
    change_kind: str,
    max_risk: str = "low",
    description: str = "",
) -> StandardChangeTemplate:
    """A new version of the template `key` (version 1 when it is new)."""
    permissions.ensure_can_manage_calendar(actor)
    latest = (
        StandardChangeTemplate.objects.select_for_update()
        .filter(key=key)
        .aggregate(v=Max("version"))["v"]
    )
    template = StandardChangeTemplate(
        key=key,
        version=(latest or 0) + 1,
        title=title,
        tier=tier,
        change_kind=change_kind,
        max_risk=max_risk,
        description=description,
        created_by=actor,
    )
    template.full_clean()
    if change_kind not in Release.ChangeKind.values:
        raise ValidationError(
            {
                "change_kind": f"{change_kind!r} is not a change kind; expected one of "
                f"{', '.join(Release.ChangeKind.values)}."
            }
        )
    template.save(force_insert=True)
    append_event(
        actor=actor,
        action="release.standard_template_created",
        subject=template,
        payload={
            "key": key,
            "version": template.version,
            "tier": tier,
            "change_kind": change_kind,
            "max_risk": max_risk,
            "title": title,
        },
    )
    return template


@transaction.atomic
def retire_standard_template(
    template: StandardChangeTemplate, *, actor: Actor
) -> StandardChangeTemplate:
    permissions.ensure_can_manage_calendar(actor)
    template = StandardChangeTemplate.objects.select_for_update().get(pk=template.pk)
    if template.retired_at is not None:
        raise TransitionRefused(
            f"Template {template} was already retired on {template.retired_at:%Y-%m-%d}.",
            state="retired",
        )
    template.retired_at = timezone.now()
    template.retired_by = actor
    template.save(update_fields=["retired_at", "retired_by"])
    append_event(
        actor=actor,
        action="release.standard_template_retired",
        subject=template,
        payload={"key": template.key, "version": template.version},
    )
    return template


@transaction.atomic
def create_blackout_window(
    *,
    actor: Actor,
    name: str,
    starts_at: dt.datetime,
    ends_at: dt.datetime,
    service: Service | None = None,
    recurrence: str = BlackoutWindow.Recurrence.NONE,
    reason: str = "",
) -> BlackoutWindow:
    permissions.ensure_can_manage_calendar(actor)
    window = BlackoutWindow(
        name=name,
        service=service,
        starts_at=starts_at,
        ends_at=ends_at,
        recurrence=recurrence,
        reason=reason,
        created_by=actor,
    )
    window.full_clean()
    window.save(force_insert=True)
    append_event(
        actor=actor,
        action="release.blackout_window_created",
        subject=window,
        payload={
            "name": name,
            "service": service.slug if service else None,
            "starts_at": starts_at,
            "ends_at": ends_at,
            "recurrence": recurrence,
            "reason": reason,
        },
        service_id=service.pk if service else None,
    )
    return window
