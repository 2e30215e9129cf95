"""Who may do what with a release: one function per rule.

Pages, the API and the verbs all ask these. `can_*` answer a yes/no for a page
to offer an action; `ensure_*` raise PermissionDenied with the reason (the
verbs call them; `actor=None` is the system, which may do anything). Reading a
release needs only to be signed in, like the rest of the ledger.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeGuard

from django.core.exceptions import PermissionDenied

from ledger.permissions import can_edit_team_objects
from ledger.roles import Role, has_role
from lib.actors import Actor, Requester
from releases import policy

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from ledger.models import Service
    from releases.models import Release, SignOff

# The roles that may set a gate aside (a permission of its own, not a sign-off role).
WAIVER_ROLES = (Role.SECURITY_COMPLIANCE, Role.PLATFORM_SRE)


def _signed_in(user: Requester) -> TypeGuard[User]:
    return user is not None and user.is_authenticated


def can_view_release(user: Requester, release: Release) -> bool:
    return _signed_in(user)


def can_file_release(user: Requester, service: Service) -> bool:
    """A model owner of the service's team files its releases."""
    return can_edit_team_objects(user, service.team)


def can_file_some_release(user: Requester) -> bool:
    """Whether any service at all has the person as a model owner of its team."""
    from ledger.models import Service
    from ledger.permissions import editable_teams

    return _signed_in(user) and Service.objects.filter(team__in=editable_teams(user)).exists()


def can_edit_release(user: Requester, release: Release) -> bool:
    """Change the form, submit or withdraw it: a model owner of the team, while it is open."""
    return can_file_release(user, release.service)


def holds_signer_role(user: Requester, release: Release, role: str) -> bool:
    """Whether `user` holds what signing `role` needs (not whether they may sign now)."""
    if not _signed_in(user):
        return False
    if user.is_superuser:
        return True
    needed = Role(policy.SIGNER_ROLES[role])
    if not has_role(user, needed):
        return False
    if role == "model_team":
        # The model team is the service's team, not any model owner.
        return release.service.team.members.filter(pk=user.pk).exists()
    return True


def signoff_refusal(
    user: Requester, release: Release, role: str, *, signoffs: Sequence[SignOff] | None = None
) -> str | None:
    """Why `user` may not sign `role` on `release` now, or None when they may.

    `signoffs`: the release's sign-offs when the caller has just read them (a page
    that assessed the release); otherwise the person's are read."""
    from releases.models import SignOff

    labels = dict(SignOff.Role.choices)
    if role not in labels:
        return f"{role!r} is not a sign-off role; expected one of {', '.join(labels)}."
    if not _signed_in(user):
        return "Sign in to sign off."
    if release.filed_by_id == user.pk:
        return "You filed this release: the filer cannot sign it off."
    if not holds_signer_role(user, release, role):
        needed = Role(policy.SIGNER_ROLES[role]).label
        team = " of the service's team" if role == "model_team" else ""
        return f"Only a {needed.lower()}{team} can sign off for {labels[role].lower()}."
    given = release.signoffs.filter(signer=user) if signoffs is None else signoffs
    other = next(
        (s for s in given if s.signer_id == user.pk and s.voided_at is None and s.role != role),
        None,
    )
    if other is not None:
        return (
            f"You already signed for {labels[other.role].lower()} on this release: "
            "one person signs one role only."
        )
    return None


def can_sign(
    user: Requester, release: Release, role: str, *, signoffs: Sequence[SignOff] | None = None
) -> bool:
    return signoff_refusal(user, release, role, signoffs=signoffs) is None


def can_waive(user: Requester) -> bool:
    """Set a gate aside: security & compliance or platform, never the filer's own choice."""
    return _signed_in(user) and (
        user.is_superuser or any(has_role(user, role) for role in WAIVER_ROLES)
    )


def can_comment(user: Requester, release: Release) -> bool:
    """Anyone with a part in releases: model owners, signers of every role (not auditors only)."""
    if not _signed_in(user):
        return False
    if user.is_superuser:
        return True
    return any(
        has_role(user, role)
        for role in (
            Role.MODEL_OWNER,
            Role.PLATFORM_SRE,
            Role.SECURITY_COMPLIANCE,
            Role.BUSINESS_OWNER,
        )
    )


def can_manage_calendar(user: Requester) -> bool:
    """Standard change templates and blackout windows: platform."""
    return _signed_in(user) and (user.is_superuser or has_role(user, Role.PLATFORM_SRE))


# ---------------------------------------------------------------- ensure_*


def ensure_can_file(actor: Actor, service: Service) -> None:
    if actor is not None and not can_file_release(actor, service):
        raise PermissionDenied(
            f"Only model owners of team {service.team.slug!r} can file releases of {service.slug}."
        )


def ensure_can_file_some(actor: Actor) -> None:
    if actor is not None and not can_file_some_release(actor):
        raise PermissionDenied(
            "Only model owners file releases, each for the services of their own teams; "
            "you can file for no service."
        )


def ensure_can_edit(actor: Actor, release: Release) -> None:
    if actor is not None and not can_edit_release(actor, release):
        raise PermissionDenied(
            f"Only model owners of team {release.service.team.slug!r} can change release "
            f"#{release.pk}."
        )


def ensure_can_sign(actor: Actor, release: Release, role: str) -> None:
    if actor is None:
        raise PermissionDenied("A sign-off needs a person: the system cannot sign.")
    refusal = signoff_refusal(actor, release, role)
    if refusal:
        raise PermissionDenied(refusal)


def ensure_can_waive(actor: Actor) -> None:
    if actor is not None and not can_waive(actor):
        raise PermissionDenied("Only security & compliance or platform can waive a gate.")


def ensure_can_comment(actor: Actor, release: Release) -> None:
    if actor is not None and not can_comment(actor, release):
        raise PermissionDenied("Only model owners and signers can comment on a release.")


def ensure_can_manage_calendar(actor: Actor) -> None:
    if actor is not None and not can_manage_calendar(actor):
        raise PermissionDenied(
            "Only platform can change standard change templates and blackout windows."
        )
