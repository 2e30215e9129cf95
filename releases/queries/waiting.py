"""Named reads of releases for pages: what waits for whom.

Gates and snapshots are in `releases.gates`; this holds the lists.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Prefetch, QuerySet

from ledger.roles import roles_of
from lib.actors import Requester
from releases import policy
from releases.models import Release, SignOff

# States in which a release can wait for a signature.
AWAITING_STATES = ("submitted", "rolling_out")


@dataclass(frozen=True)
class Awaiting:
    release: Release
    roles: tuple[str, ...]  # the roles this person could sign and nobody has
    gates_of_interest: tuple[str, ...]  # what those roles look at first


def signer_roles_of(user: Requester) -> list[str]:
    """The sign-off roles a person's roles let them sign (superusers: every one)."""
    if user is None or not user.is_authenticated:
        return []
    if user.is_superuser:
        return list(policy.SIGNER_ROLES)
    held = {role.value for role in roles_of(user)}
    return [role for role, needs in policy.SIGNER_ROLES.items() if needs in held]


def _candidates() -> QuerySet[Release]:
    standing = SignOff.objects.filter(voided_at__isnull=True).only(
        "release_id", "role", "signer_id"
    )
    return (
        Release.objects.filter(state__in=AWAITING_STATES)
        .select_related("service", "to_revision", "filed_by")
        .prefetch_related(Prefetch("signoffs", queryset=standing, to_attr="standing_signoffs"))
        .order_by("signoffs_due_at", "submitted_at", "pk")
    )


def waiting_for(user: Requester) -> list[Awaiting]:
    """Releases awaiting a sign-off this person may give, most urgent first.

    Four queries whatever the number of releases: the person's roles (cached on
    the user afterwards), their teams, the releases, their standing sign-offs. Sign-offs voided by a change made
    elsewhere (new evidence) count once `revalidate_release` recorded the void;
    the release page shows them voided at once.
    """
    roles = signer_roles_of(user)
    if not roles or user is None or not user.is_authenticated:
        return []
    teams: set[int] = set()
    if "model_team" in roles:
        teams = set(user.teams.values_list("pk", flat=True))
    found = []
    for release in _candidates().exclude(filed_by=user.pk):
        standing = release.standing_signoffs  # type: ignore[attr-defined]
        if any(s.signer_id == user.pk for s in standing):
            continue  # one person signs one role
        required = policy.required_signoffs(release.service.tier, release.path)
        signed = {s.role for s in standing}
        mine = tuple(
            role
            for role in required
            if role in roles
            and role not in signed
            and (role != "model_team" or user.is_superuser or release.service.team_id in teams)
        )
        if mine:
            interest = tuple(
                dict.fromkeys(g for role in mine for g in policy.GATES_OF_INTEREST[role])
            )
            found.append(Awaiting(release, mine, interest))
    return found


__all__ = ["AWAITING_STATES", "Awaiting", "signer_roles_of", "waiting_for"]
