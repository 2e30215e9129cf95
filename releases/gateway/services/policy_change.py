"""A policy version written inline on the release form: record it (or reuse the version
that already says the same), make the candidate revision that runs it, and — on a draft —
make that revision the release's candidate. All of it or nothing: a refused document, a
refused revision or a refused release change leaves no version and no revision behind."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.translation import gettext as _

from ledger.models import GatewayPolicy, Revision, Service
from ledger.services.gateway_policies import create_gateway_policy, revision_running
from lib.actors import Actor
from releases import permissions
from releases.governance.services import update_release
from releases.models import Release


@dataclass(frozen=True)
class PolicyCandidate:
    policy: GatewayPolicy
    revision: Revision
    recorded: bool  # False: an existing version already said the same


def _essence(document: dict[str, Any] | None) -> dict[str, Any] | None:
    """What a document says: an empty section says the same as a missing one (the form
    leaves empty sections out; a version recorded through the API may carry them)."""
    if document is None:
        return None
    return {section: value for section, value in document.items() if value not in ({}, [])}


@transaction.atomic
def candidate_with_policy(
    service: Service, *, actor: Actor, document: dict[str, Any], note: str, base: Revision | None
) -> PolicyCandidate:
    """The revision like `base` (the live one unless named) running `document`."""
    permissions.ensure_can_file(actor, service)
    essence = _essence(document)
    running = base or service.live_revision
    if running is not None and _essence(running.gateway_policy.document) == essence:
        raise ValidationError(
            _("This is what %(label)s, which %(revision)s runs, already says: nothing changes.")
            % {"label": running.gateway_policy.label, "revision": running.label}
        )
    policy = next(
        (
            known
            for known in service.gateway_policies.exclude(document=None).order_by("-version")
            if _essence(known.document) == essence
        ),
        None,
    )
    recorded = policy is None
    if policy is None:
        policy = create_gateway_policy(service, actor=actor, document=document, note=note)
    revision = revision_running(policy, actor=actor, base=base)
    return PolicyCandidate(policy=policy, revision=revision, recorded=recorded)


@transaction.atomic
def change_release_policy(
    release: Release, *, actor: Actor, document: dict[str, Any], note: str
) -> PolicyCandidate:
    """A draft's candidate, running `document` instead of its policy."""
    permissions.ensure_can_edit(actor, release)
    if not release.is_draft:
        raise ValidationError(
            _(
                "Release #%(pk)s is %(state)s: its candidate changes only while a draft. "
                "Withdraw it and file a new one."
            )
            % {"pk": release.pk, "state": release.get_state_display().lower()}
        )
    candidate = candidate_with_policy(
        release.service, actor=actor, document=document, note=note, base=release.to_revision
    )
    update_release(release, actor=actor, to_revision=candidate.revision)
    return candidate
