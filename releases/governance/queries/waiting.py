"""Named reads of releases for pages: what waits for whom.

Gates and snapshots are in `releases.governance.gates`; this holds the lists.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from django.db.models import Exists, OuterRef

from ledger.roles import roles_of
from lib.actors import Requester
from releases import policy
from releases.governance.gates import read_releases
from releases.models import Release, SignOff, Waiver

# States in which a release can wait for a signature.
AWAITING_STATES = ("submitted", "rolling_out")


@dataclass(frozen=True)
class Awaiting:
    release: Release
    roles: tuple[str, ...]  # the roles this person could sign and nobody has
    gates_of_interest: tuple[str, ...]  # what those roles look at first


def signer_roles_of(user: Requester) -> list[str]:
    """The sign-off roles a person's roles let them sign (superusers: every one; the
    model team's only in the service's team, which `waiting_for` checks)."""
    if user is None or not user.is_authenticated:
        return []
    if user.is_superuser:
        return list(policy.SIGNER_ROLES)
    held = {role.value for role in roles_of(user)}
    return [role for role, needs in policy.SIGNER_ROLES.items() if needs in held]


def waiting_for(user: Requester, *, limit: int | None = None) -> tuple[list[Awaiting], int]:
    """Releases awaiting a sign-off this person may give, most urgent first: the first
    `limit` of them (all with None) and how many there are.

    Six queries whatever the number of releases: the person's roles (cached on
    the user afterwards), their teams, the awaiting releases (with, per role, whether
    the person waived a gate that role owns: they do not sign it, as
    `permissions.signoff_refusal` says) and their standing
    sign-offs as plain values (a fleet can have thousands; only the values are
    judged), then the releases listed, read as the gates read them (two queries,
    `releases.governance.gates.read_releases`), so a page can assess them without reading them again
    (`assess_many(releases, reload=False)`). Sign-offs voided by a change made
    elsewhere (new evidence) count once `revalidate_release` recorded the void;
    the release page shows them voided at once.
    """
    roles = signer_roles_of(user)
    if not roles or user is None or not user.is_authenticated:
        return [], 0
    teams: set[int] = set()
    if "model_team" in roles:
        teams = set(user.teams.values_list("pk", flat=True))
    # Per role, whether the person stands behind a waiver of one of its gates.
    waived_owned = {
        f"waived_{role}": Exists(
            Waiver.objects.filter(
                release=OuterRef("pk"),
                granted_by=user.pk,
                revoked_at__isnull=True,
                gate__in=policy.gates_waived_by(role),
            )
        )
        for role in roles
        if policy.gates_waived_by(role)
    }
    candidates = (
        Release.objects.filter(state__in=AWAITING_STATES)
        .exclude(filed_by=user.pk)
        .annotate(**waived_owned)
        .order_by("signoffs_due_at", "submitted_at", "pk")
        .values_list(
            "pk",
            "service__tier",
            "path",
            "service__team_id",
            "failure_classifications",
            *waived_owned,
        )
    )
    standing: dict[int, list[tuple[str, int]]] = defaultdict(list)
    for release_id, role, signer_id in SignOff.objects.filter(
        release__state__in=AWAITING_STATES, voided_at__isnull=True
    ).values_list("release_id", "role", "signer_id"):
        standing[release_id].append((role, signer_id))
    found: list[tuple[int, tuple[str, ...]]] = []
    for pk, tier, path, team_id, classifications, *waived in candidates:
        signed = standing[pk]
        if any(signer_id == user.pk for _, signer_id in signed):
            continue  # one person signs one role
        not_mine = {
            name.removeprefix("waived_")
            for name, flag in zip(waived_owned, waived, strict=True)
            if flag
        }
        mine = tuple(
            role
            for role in policy.required_signoffs(
                tier, path, risk_accepted=policy.accepts_risk(classifications)
            )
            if role in roles
            and role not in not_mine
            and all(role != given for given, _ in signed)
            # The model team is the service's team, administrators included.
            and (role != "model_team" or team_id in teams)
        )
        if mine:
            found.append((pk, mine))
    listed = found if limit is None else found[:limit]
    releases = read_releases(pk for pk, _ in listed) if listed else {}
    return [
        Awaiting(
            releases[pk],
            mine,
            tuple(dict.fromkeys(g for role in mine for g in policy.GATES_OF_INTEREST[role])),
        )
        for pk, mine in listed
    ], len(found)


__all__ = ["AWAITING_STATES", "Awaiting", "signer_roles_of", "waiting_for"]
