"""Unauthorized changes: a probe found a backend of a live revision serving something
else than the ledger says (replay's drift). Each finding becomes a record the service
page and the incident screen show until someone reconciles it, so drift is never
silently tolerated.

A periodic sweep turns the latest drifting probe of each live backend into a record
(one open record per backend); a release that makes a revision live, or a rollback,
reconciles the service's open records; so can a person with the rollback permission,
saying how the backend was put back.
"""

from __future__ import annotations

import datetime as dt

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F, OuterRef, Subquery
from django.utils import timezone

from ledger.chain import append_event
from ledger.models import Service
from lib.actors import Actor
from releases import permissions
from releases.models import UnauthorizedChange
from replay.models import Probe


def _latest_live_probes() -> list[Probe]:
    """The latest reachable probe of every backend serving its service's live revision
    (a correlated subquery rather than DISTINCT ON: SQLite runs it too)."""
    latest = (
        Probe.objects.filter(backend=OuterRef("backend"), reachable=True)
        .order_by("-started_at", "-pk")
        .values("pk")[:1]
    )
    return list(
        Probe.objects.filter(
            pk=Subquery(latest),
            backend__enabled=True,
            backend__revision=F("backend__revision__service__live_revision"),
        ).select_related("backend__revision__service")
    )


@transaction.atomic
def record_unauthorized_changes(*, now: dt.datetime | None = None) -> list[UnauthorizedChange]:
    """Record each live backend's drift found by its latest probe, once."""
    now = now or timezone.now()
    drifting = [p for p in _latest_live_probes() if p.drift]
    if not drifting:
        return []
    open_backends = set(
        UnauthorizedChange.objects.filter(
            reconciled_at__isnull=True, backend__in=[p.backend_id for p in drifting]
        ).values_list("backend_id", flat=True)
    )
    recorded = []
    for probe in drifting:
        if probe.backend_id in open_backends:
            continue
        backend = probe.backend
        revision = backend.revision
        change = UnauthorizedChange.objects.create(
            service=revision.service,
            backend=backend,
            probe=probe,
            expected_revision=revision,
            found=probe.drift,
            detected_at=probe.started_at,
        )
        append_event(
            actor=None,
            action="service.unauthorized_change",
            subject=change,
            subject_label=f"{revision.service.slug}: {backend.name}",
            service_id=revision.service_id,
            payload={
                "backend": backend.name,
                "probe": probe.pk,
                "expected": {"revision": revision.pk, "fingerprint": revision.fingerprint},
                "found": probe.drift,
                "detected_at": probe.started_at,
            },
        )
        recorded.append(change)
    return recorded


def reconcile_open_changes(service: Service, *, actor: Actor, how: str) -> int:
    """Close the service's open findings (inside a release or rollback verb)."""
    now = timezone.now()
    found = list(
        UnauthorizedChange.objects.select_for_update().filter(
            service=service, reconciled_at__isnull=True
        )
    )
    for change in found:
        _reconcile(change, actor=actor, how=how, now=now)
    return len(found)


def _reconcile(change: UnauthorizedChange, *, actor: Actor, how: str, now: dt.datetime) -> None:
    change.reconciled_at, change.reconciled_by, change.reconciliation = now, actor, how
    change.save(update_fields=["reconciled_at", "reconciled_by", "reconciliation"])
    append_event(
        actor=actor,
        action="service.unauthorized_change_reconciled",
        subject=change,
        subject_label=str(change),
        service_id=change.service_id,
        payload={"how": how},
    )


@transaction.atomic
def reconcile_change(change: UnauthorizedChange, *, actor: Actor, note: str) -> UnauthorizedChange:
    """A person closes a finding, saying how the backend was put back."""
    change = (
        UnauthorizedChange.objects.select_for_update()
        .select_related("service__team")
        .get(pk=change.pk)
    )
    permissions.ensure_can_reconcile(actor, change.service)
    if change.reconciled_at is not None:
        raise ValidationError(
            {"note": f"Already reconciled on {change.reconciled_at:%Y-%m-%d %H:%M %Z}."}
        )
    if not note.strip():
        raise ValidationError(
            {
                "note": "Say how it was reconciled, e.g. the node was restarted with the "
                "registered image and a probe matched."
            }
        )
    _reconcile(change, actor=actor, how=note.strip(), now=timezone.now())
    return change
