"""What needs a person now, for the home page: rollouts whose guard breached (roll back
first), held rollouts, rollbacks to confirm and unauthorized changes; the services of
their teams that are not healthy or whose evidence has lapsed, the licenses waiting
for their review, the releases waiting for their sign-off, their own releases that
were rejected or wait for them; and what changed in the last day. Every item
names what is wrong and where to act."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Literal

from django.db.models import Exists, OuterRef, Prefetch, Q, QuerySet
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import pgettext

from ledger.models import Event, LoadTestReport, ModelAsset, Service
from ledger.permissions import can_approve_licenses
from ledger.queries.staleness import evidence_status, newest_by_workload
from lib.actors import Requester
from releases import permissions
from releases.governance.queries.waiting import waiting_for
from releases.models import Release, RollbackEvent, SignOff, Stage, UnauthorizedChange
from releases.reviews.queries.reviews import attention_items as review_attention
from replay import queries as replay_queries

# More services than this in a person's teams are summarised, not listed one by one:
# the home page must answer quickly, and the catalog has filters for the rest.
MAX_SERVICES_CHECKED = 25
MAX_LICENSES_LISTED = 10
MAX_SIGNOFFS_LISTED = 10
RECENT_WINDOW = dt.timedelta(hours=24)
RECENT_LISTED = 10
MAX_ROLLOUTS_LISTED = 10
MAX_OWN_RELEASES_LISTED = 10
# A rejection asks its filer to act for this long, unless they reopen the release.
REJECTIONS_SHOWN = dt.timedelta(days=30)

Urgency = Literal["act", "look"]


@dataclass(frozen=True)
class AttentionItem:
    urgency: Urgency  # "act": something is wrong; "look": nothing watches it, or it waits
    subject: str
    text: str
    url: str


@dataclass(frozen=True)
class Attention:
    items: list[AttentionItem]
    services_checked: int
    services_total: int


def _team_services(user: Requester) -> QuerySet[Service]:
    if user is None or not user.is_authenticated:
        return Service.objects.none()
    return (
        Service.objects.filter(team__members=user)
        .select_related("team", "live_revision__runtime", "live_revision__service")
        .order_by("slug")
        .distinct()
    )


def _service_items(service: Service, now: dt.datetime) -> list[AttentionItem]:
    url = reverse("releases:service_detail", args=[service.slug])
    items: list[AttentionItem] = []
    health = replay_queries.live_health(service, now=now)
    if health["word"] == "not monitored":
        if service.live_revision_id is not None:
            items.append(AttentionItem("look", service.slug, health["reasons"][0]["text"], url))
    elif health["word"] != "healthy":
        first = health["reasons"][0]
        items.append(
            AttentionItem(
                "act",
                service.slug,
                _("%(health)s: %(reason)s")
                % {"health": pgettext("verdict", health["word"]), "reason": first["text"]},
                url,
            )
        )
    live = service.live_revision
    if live is not None:
        reports = LoadTestReport.objects.with_context().filter(revision=live)
        for workload, report in newest_by_workload(reports).items():
            status = evidence_status(report, now=now)
            if status.status != "current":
                items.append(
                    AttentionItem(
                        "act",
                        service.slug,
                        _("%(workload)s evidence of %(revision)s is %(status)s: %(reason)s")
                        % {
                            "workload": workload,
                            "revision": live.label,
                            "status": pgettext("state word", status.status),
                            "reason": status.reason,
                        },
                        url,
                    )
                )
    return items


def _signoff_items(user: Requester, now: dt.datetime) -> list[AttentionItem]:
    """Releases waiting for this person's sign-off; overdue emergency ones ask to act."""
    items = []
    for waiting in waiting_for(user, limit=MAX_SIGNOFFS_LISTED)[0]:
        release = waiting.release
        roles = ", ".join(_(dict(SignOff.Role.choices)[role]).lower() for role in waiting.roles)
        text = _("release #%(release)s (%(revision)s) waits for your sign-off as %(roles)s") % {
            "release": release.pk,
            "revision": release.to_revision.label,
            "roles": roles,
        }
        overdue = release.signoffs_due_at is not None and release.signoffs_due_at <= now
        if overdue:
            text += _("; the emergency sign-offs are overdue")
        items.append(
            AttentionItem(
                "act" if overdue else "look",
                release.service.slug,
                text,
                reverse("releases:release_detail", args=[release.pk]) + "#signoffs",
            )
        )
    return items


def _own_release_items(user: Requester, now: dt.datetime) -> list[AttentionItem]:
    """The person's own releases that wait for them: a recent rejection not yet reopened
    (act), an approved one whose rollout they may start, a draft to submit (two queries:
    the releases, and the rejections of those rejected)."""
    if user is None or not user.is_authenticated:
        return []
    reopened = Release.objects.filter(reopened_from=OuterRef("pk"))
    releases = (
        Release.objects.filter(filed_by=user)
        .filter(
            Q(state=Release.State.REJECTED, closed_at__gte=now - REJECTIONS_SHOWN)
            & ~Exists(reopened)
            | Q(state__in=(Release.State.APPROVED, Release.State.DRAFT))
        )
        .select_related("service__team", "to_revision")
        .prefetch_related(
            Prefetch(
                "signoffs",
                SignOff.objects.filter(decision=SignOff.Decision.REJECT, voided_at__isnull=True)
                .select_related("signer")
                .order_by("-signed_at", "-pk"),
                to_attr="rejections",
            )
        )
        .order_by("-updated_at", "-pk")[:MAX_OWN_RELEASES_LISTED]
    )
    items = []
    startable: dict[int, bool] = {}  # the rule asked once per team, not once per release
    for release in releases:
        said = {"release": release.pk, "revision": release.to_revision.label}
        url = reverse("releases:release_detail", args=[release.pk])
        if release.state == Release.State.REJECTED:
            rejections: list[SignOff] = getattr(release, "rejections", [])
            rejection = rejections[0] if rejections else None
            text = _("release #%(release)s (%(revision)s) was rejected") % said
            if rejection is not None:
                text = _(
                    "release #%(release)s (%(revision)s) was rejected by %(signer)s for the "
                    "%(role)s: “%(comment)s”"
                ) % {
                    **said,
                    "signer": rejection.signer.get_username(),
                    "role": _(rejection.get_role_display()).lower(),
                    "comment": rejection.comment,
                }
            text += _("; reopen it as a new draft, or leave it")
            items.append(AttentionItem("act", release.service.slug, text, url + "#signoffs"))
        elif release.state == Release.State.APPROVED:
            team = release.service.team_id
            if team not in startable:
                startable[team] = permissions.can_start_rollout(user, release)
            if startable[team]:
                text = _(
                    "release #%(release)s (%(revision)s) is approved: its rollout waits for "
                    "you to start it"
                )
                items.append(
                    AttentionItem("look", release.service.slug, text % said, url + "#rollout")
                )
        else:
            text = _(
                "release #%(release)s (%(revision)s) is a draft: submit it once its gates pass"
            )
            items.append(AttentionItem("look", release.service.slug, text % said, url))
    return items


def _rollout_items(user: Requester, team_services: QuerySet[Service]) -> list[AttentionItem]:
    """Breached and held rollouts, rollbacks waiting for a confirmation and unauthorized
    changes: fleet-wide for whoever may roll back, else on the person's teams' services."""
    fleet = permissions.can_record_rollback(user)
    if not fleet and not team_services.exists():
        return []
    scope = Q() if fleet else Q(service__in=team_services)
    items: list[AttentionItem] = []
    stages = (
        Stage.objects.filter(
            Q(release__state=Release.State.ROLLING_OUT)
            & Q(state__in=(Stage.State.BREACHED, Stage.State.HELD))
            & (Q() if fleet else Q(release__service__in=team_services))
        )
        .select_related("release__service")
        .order_by("state", "-started_at")[:MAX_ROLLOUTS_LISTED]
    )
    for stage in stages:
        release = stage.release
        slug = release.service.slug
        if stage.state == Stage.State.BREACHED:
            items.append(
                AttentionItem(
                    "act",
                    slug,
                    _(
                        "roll back: a guard breached stage %(stage)s of release #%(release)s (%(why)s)"
                    )
                    % {"stage": stage.number, "release": release.pk, "why": stage.state_reason},
                    reverse("releases:incident", args=[slug]),
                )
            )
        else:
            items.append(
                AttentionItem(
                    "look",
                    slug,
                    _("stage %(stage)s of release #%(release)s is held: %(why)s")
                    % {"stage": stage.number, "release": release.pk, "why": stage.state_reason},
                    reverse("releases:release_detail", args=[release.pk]) + "#rollout",
                )
            )
    for rollback in (
        RollbackEvent.objects.filter(scope, state=RollbackEvent.State.AWAITING_CONFIRMATION)
        .select_related("service")
        .order_by("-started_at")[:MAX_ROLLOUTS_LISTED]
    ):
        items.append(
            AttentionItem(
                "act",
                rollback.service.slug,
                _("rollback #%(rollback)s waits for someone to confirm how it went")
                % {"rollback": rollback.pk},
                reverse("releases:rollback_detail", args=[rollback.service.slug, rollback.pk]),
            )
        )
    for change in (
        UnauthorizedChange.objects.filter(scope, reconciled_at__isnull=True)
        .select_related("service")
        .order_by("-detected_at")[:MAX_ROLLOUTS_LISTED]
    ):
        what = ", ".join(str(item.get("what")) for item in change.found if isinstance(item, dict))
        items.append(
            AttentionItem(
                "act",
                change.service.slug,
                _(
                    "unauthorized change: the live backend serves another %(what)s than the ledger says"
                )
                % {"what": what or _("thing")},
                reverse("releases:service_detail", args=[change.service.slug]) + "#unauthorized",
            )
        )
    return items


def attention_for(user: Requester, *, now: dt.datetime | None = None) -> Attention:
    """The person's to-do list, most urgent first (a bounded number of queries)."""
    now = now or timezone.now()
    services = _team_services(user)
    total = services.count()
    items: list[AttentionItem] = _rollout_items(user, services)
    for service in services[:MAX_SERVICES_CHECKED]:
        items.extend(_service_items(service, now))
    if can_approve_licenses(user):
        pending = ModelAsset.objects.filter(
            license_approval=ModelAsset.LicenseApproval.PENDING,
            lifecycle=ModelAsset.Lifecycle.ACTIVE,
        ).select_related("license")
        for asset in pending.order_by("name", "pk")[:MAX_LICENSES_LISTED]:
            items.append(
                AttentionItem(
                    "look",
                    str(asset),
                    _("license %(license)s waits for your review")
                    % {"license": asset.license.spdx_id},
                    reverse("ledger:asset_detail", args=[asset.pk]),
                )
            )
    items.extend(_own_release_items(user, now))
    items.extend(_signoff_items(user, now))
    items.extend(AttentionItem(*item) for item in review_attention(user))
    items.sort(key=lambda item: item.urgency != "act")
    return Attention(
        items=items, services_checked=min(total, MAX_SERVICES_CHECKED), services_total=total
    )


@dataclass(frozen=True)
class RecentChanges:
    events: list[Event]
    count: int
    since: dt.datetime


def recent_changes(*, now: dt.datetime | None = None) -> RecentChanges:
    """Events of the last 24 hours, newest first (two indexed queries)."""
    since = (now or timezone.now()) - RECENT_WINDOW
    window = Event.objects.filter(created_at__gte=since)
    return RecentChanges(
        events=list(window.order_by("-sequence")[:RECENT_LISTED]),
        count=window.count(),
        since=since,
    )
