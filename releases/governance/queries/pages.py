"""Reads the release pages need beyond the gates: the list, the timeline, comments,
the service page's releases (what waits for whom is `releases.governance.queries.waiting`).

Each is a bounded number of queries whatever the number of releases, so the
list, the release page and "waiting for me" answer in constant query counts.
"""

from __future__ import annotations

import datetime as dt

from django.contrib.auth import get_user_model
from django.db.models import Prefetch, Q, QuerySet
from django.utils import timezone

from ledger.models import Event, Revision, Service
from releases.governance.gates import read_releases
from releases.models import BlackoutWindow, Comment, Release, Waiver
from releases.transitions import Action

RELEASE_SUBJECT = "releases.release"


LIST_FIELDS = (
    "id",
    "service_id",
    "from_revision_id",
    "to_revision_id",
    "change_kind",
    "risk",
    "summary",
    "state",
    "path",
    "filed_by_id",
    "created_at",
)


def release_list_queryset() -> QuerySet[Release]:
    """The list's rows with what each shows: service, revisions, filer.

    Prefetched rather than joined: with a join PostgreSQL joins every release
    before it sorts them for the page (40 ms at 10,000 releases); without, it
    sorts the narrow release rows alone and fetches the few related rows of
    the page by key (four small queries). Only the columns the rows show are
    read: a release's JSON fields (plans, impact, classifications) cost more to
    decode than the rest of its row.
    """
    return (
        Release.objects.only(*LIST_FIELDS)
        .prefetch_related(
            Prefetch("service", Service.objects.only("id", "slug", "tier")),
            Prefetch("from_revision", Revision.objects.only("id", "number")),
            Prefetch("to_revision", Revision.objects.only("id", "number")),
            Prefetch("filed_by", get_user_model().objects.only("id", "username")),
        )
        .order_by("-created_at", "-id")
    )


def release_for_page(pk: int) -> Release | None:
    """The release page's release, as the gates read it (so they need not read it again:
    `assess(release, reload=False)`); that has every part the page shows, the diff's
    revisions with their assets and runtimes included."""
    return read_releases([pk]).get(pk)


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
    """The drafts reopened from a release: only a rejected or withdrawn one has any."""
    if not release.allowed(Action.REOPEN):
        return []
    return list(Release.objects.filter(reopened_from=release).only("pk", "state").order_by("pk"))


def waivers_lapsing_on_reopen(release: Release, *, now: dt.datetime | None = None) -> list[Waiver]:
    """The waivers standing on a release that reopening it leaves behind: a waiver is
    granted for one release, and the new draft starts with none."""
    now = now or timezone.now()
    return list(
        Waiver.objects.filter(release=release, revoked_at__isnull=True, expires_at__gt=now)
        .select_related("granted_by")
        .order_by("gate", "granted_at")
    )


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
    "blackout_warning",
    "comments",
    "release_for_page",
    "release_list_queryset",
    "reopened_as",
    "service_releases",
    "timeline",
]
