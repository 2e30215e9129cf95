"""Reads the release pages need beyond the gates: lists, the timeline, what waits for whom.

Each is a bounded number of queries whatever the number of releases, so the
list, the release page and "waiting for me" answer in constant query counts.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.db.models import Count, Prefetch, Q, QuerySet
from django.utils import timezone

from ledger.models import Event, Service
from ledger.roles import roles_of
from lib.actors import Requester
from releases import policy
from releases.models import BlackoutWindow, Comment, Release, SignOff

RELEASE_SUBJECT = "releases.release"
# The roles a person may sign for, from the roles they hold (ledger.roles).
SIGNOFF_ROLES_OF: dict[str, str] = {held: signs for signs, held in policy.SIGNER_ROLES.items()}


def release_list_queryset() -> QuerySet[Release]:
    """The list's rows with what each shows: service, revisions, filer.

    Prefetched rather than joined: with a join PostgreSQL joins every release
    before it sorts them for the page (40 ms at 10,000 releases); without, it
    sorts the narrow release rows alone and fetches the few related rows of
    the page by key (four small queries).
    """
    return Release.objects.prefetch_related(
        "service", "from_revision", "to_revision", "filed_by"
    ).order_by("-created_at", "-id")


def release_for_page(pk: int) -> QuerySet[Release]:
    return (
        Release.objects.for_gates()
        .select_related("reopened_from", "to_revision__model_asset__license")
        .filter(pk=pk)
    )


def timeline(release: Release, limit: int = 200) -> list[Event]:
    """The release's events, oldest first (one indexed query)."""
    events = Event.objects.for_subject(RELEASE_SUBJECT, release.pk).order_by("-sequence")[:limit]
    return list(reversed(list(events)))


def comments(release: Release) -> list[Comment]:
    return list(
        Comment.objects.filter(release=release)
        .select_related("author")
        .order_by("created_at", "id")
    )


def reopened_as(release: Release) -> list[Release]:
    return list(Release.objects.filter(reopened_from=release).only("pk", "state").order_by("pk"))


def blackout_warning(service: Service, moment: dt.datetime | None, path: str) -> str | None:
    """A warning while the form is filled: the planned start falls inside a blackout window."""
    if moment is None:
        return None
    windows = BlackoutWindow.objects.filter(Q(service=service) | Q(service__isnull=True)).order_by(
        "starts_at", "pk"
    )
    for window in windows:
        span = window.occurrence_containing(moment)
        if span is None:
            continue
        begins, ends = (timezone.localtime(t) for t in span)
        scope = "every service" if window.service_id is None else service.slug
        text = (
            f"The planned start falls inside the blackout window “{window.name}” for {scope} "
            f"({begins:%Y-%m-%d %H:%M} to {ends:%Y-%m-%d %H:%M %Z})"
        )
        if path == Release.Path.EMERGENCY:
            return text + "; only the emergency path may start inside it."
        return text + ": no rollout may start then. Pick another start, or the emergency path."
    return None


def signer_roles(user: Requester) -> list[str]:
    """The sign-off roles this person's roles let them sign (superusers: every role)."""
    if user is None or not user.is_authenticated:
        return []
    if user.is_superuser:
        return list(policy.SIGNER_ROLES)
    return [
        SIGNOFF_ROLES_OF[role.value] for role in roles_of(user) if role.value in SIGNOFF_ROLES_OF
    ]


@dataclass
class Waiting:
    release: Release
    roles: list[str]  # the roles it awaits from this person
    overdue: bool


def waiting_for(
    user: Requester, *, now: dt.datetime | None = None, limit: int = 100
) -> list[Waiting]:
    """Submitted releases (and emergency rollouts) that await a sign-off this person may give.

    Not their own (the filer cannot sign); not a role someone already holds a
    standing sign-off for; not if they signed another role of it already; the
    model team only for the services of their own teams. Four queries.
    """
    roles = signer_roles(user)
    if not roles or user is None or not user.is_authenticated:
        return []
    now = now or timezone.now()
    standing = SignOff.objects.filter(voided_at__isnull=True)
    releases = (
        Release.objects.filter(
            Q(state=Release.State.SUBMITTED)
            | Q(state=Release.State.ROLLING_OUT, path=Release.Path.EMERGENCY)
        )
        .exclude(filed_by=user)
        .select_related("service", "from_revision", "to_revision", "filed_by")
        .prefetch_related(Prefetch("signoffs", queryset=standing, to_attr="standing_signoffs"))
        .annotate(
            mine=Count(
                "signoffs", filter=Q(signoffs__signer=user, signoffs__voided_at__isnull=True)
            )
        )
        .filter(mine=0)
        .order_by("submitted_at", "pk")
    )
    teams = set(user.teams.values_list("pk", flat=True)) if "model_team" in roles else set()
    found: list[Waiting] = []
    for release in releases[: limit * 2]:
        required = policy.required_signoffs(release.service.tier, release.path)
        given = {s.role for s in release.standing_signoffs}
        awaited = [
            role
            for role in required
            if role in roles
            and role not in given
            and (role != "model_team" or user.is_superuser or release.service.team_id in teams)
        ]
        if awaited:
            overdue = release.signoffs_due_at is not None and release.signoffs_due_at <= now
            found.append(Waiting(release, awaited, overdue))
        if len(found) >= limit:
            break
    return found


def gates_of_interest(roles: list[str]) -> list[str]:
    keys: list[str] = []
    for role in roles:
        keys.extend(policy.GATES_OF_INTEREST.get(role, ()))
    keys.append("signoffs")
    return list(dict.fromkeys(keys))


def service_releases(service: Service, *, recent: int = 10) -> tuple[list[Release], list[Release]]:
    """The service page's open releases and its recently closed ones (two queries)."""
    base = Release.objects.filter(service=service).select_related(
        "to_revision", "from_revision", "filed_by"
    )
    open_ = list(base.filter(state__in=Release.OPEN_STATES).order_by("-created_at", "-id")[:50])
    closed = list(
        base.exclude(state__in=Release.OPEN_STATES).order_by("-updated_at", "-id")[:recent]
    )
    return open_, closed


__all__ = [
    "Waiting",
    "blackout_warning",
    "comments",
    "gates_of_interest",
    "release_for_page",
    "release_list_queryset",
    "reopened_as",
    "service_releases",
    "signer_roles",
    "timeline",
    "waiting_for",
]
