"""The record types an auditor filters and exports: one registry, read by the auditor's
page (counts, tables), the exports (one file per type) and `manage.py export_audit`.

Each `RecordType` says how to narrow its rows by the audit filters (period, service,
tier, change kind, path, release state), which columns its export files have, and which
template shows a page of it. A new kind of record joins by adding one `RecordType` to
`RECORD_TYPES` (and its row template `releases/audit/_<key>.html`), as rollbacks and
reviews did: the page grows a tab with its count, and every export format a file, with
nothing else to change.

Filters on a type that has no such field follow its release: a sign-off or a waiver
matches "change kind: model upgrade" when its release does; an event matches when its
subject is a release that does (events of other subjects then drop out).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.db.models import CharField, Q, QuerySet
from django.db.models.functions import Cast
from django.utils.translation import gettext_lazy as _

from ledger.exports.events import EVENT_COLUMNS, event_rows
from ledger.models import Event
from releases.models import Release, Review, ReviewTrigger, RollbackEvent, SignOff, Waiver

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise

RELEASE_SUBJECT = "releases.release"
# Release filters: a type whose rows belong to a release narrows through it.
RELEASE_FILTERS = ("change_kind", "path", "state")


@dataclass(frozen=True)
class AuditFilters:
    """What an auditor narrows the record by; empty means "any"."""

    since: dt.datetime | None = None
    until: dt.datetime | None = None
    service: str = ""
    tier: str = ""
    change_kind: str = ""
    path: str = ""
    state: str = ""

    def release_q(self, prefix: str = "") -> Q:
        """The filters that read a release, on a relation reached through `prefix`."""
        q = Q()
        if self.service:
            q &= Q(**{f"{prefix}service__slug": self.service})
        if self.tier:
            q &= Q(**{f"{prefix}service__tier": self.tier})
        for name in RELEASE_FILTERS:
            value = getattr(self, name)
            if value:
                q &= Q(**{f"{prefix}{name}": value})
        return q

    def period_q(self, field_name: str) -> Q:
        q = Q()
        if self.since:
            q &= Q(**{f"{field_name}__gte": self.since})
        if self.until:
            q &= Q(**{f"{field_name}__lt": self.until})
        return q

    @property
    def narrows_releases(self) -> bool:
        return any(getattr(self, name) for name in RELEASE_FILTERS)

    def as_json(self) -> dict[str, str]:
        """The filters besides the period, as an export keeps them."""
        return {
            name: getattr(self, name)
            for name in ("service", "tier", "change_kind", "path", "state")
            if getattr(self, name)
        }

    @classmethod
    def from_json(
        cls, data: dict[str, Any], *, since: dt.datetime | None, until: dt.datetime | None
    ) -> AuditFilters:
        known = {k: str(v) for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(since=since, until=until, **known)


def _releases(filters: AuditFilters) -> QuerySet[Release]:
    return Release.objects.filter(filters.release_q() & filters.period_q("created_at"))


def _signoffs(filters: AuditFilters) -> QuerySet[SignOff]:
    return SignOff.objects.filter(filters.release_q("release__") & filters.period_q("signed_at"))


def _waivers(filters: AuditFilters) -> QuerySet[Waiver]:
    return Waiver.objects.filter(filters.release_q("release__") & filters.period_q("granted_at"))


def _rollbacks(filters: AuditFilters) -> QuerySet[RollbackEvent]:
    rollbacks = RollbackEvent.objects.filter(filters.period_q("started_at"))
    if filters.service:
        rollbacks = rollbacks.filter(service__slug=filters.service)
    if filters.tier:
        rollbacks = rollbacks.filter(service__tier=filters.tier)
    if filters.narrows_releases:
        # A rollback of no release (straight from the incident screen) matches no
        # release filter.
        rollbacks = rollbacks.filter(filters.release_q("release__") & Q(release__isnull=False))
    return rollbacks


def _reviews(filters: AuditFilters) -> QuerySet[Review]:
    reviews = Review.objects.filter(filters.period_q("raised_at"))
    if filters.service:
        reviews = reviews.filter(service__slug=filters.service)
    if filters.tier:
        reviews = reviews.filter(service__tier=filters.tier)
    if filters.narrows_releases:
        # A review belongs to a service, never to a release: no release filter matches it.
        reviews = reviews.none()
    return reviews


def _events(filters: AuditFilters) -> QuerySet[Event]:
    events = Event.objects.filter(filters.period_q("created_at"))
    if filters.service:
        events = events.filter(service__slug=filters.service)
    if filters.tier:
        events = events.filter(service__tier=filters.tier)
    if filters.narrows_releases:
        # Only events of releases that match (subject ids are text in the chain).
        ids = (
            Release.objects.filter(filters.release_q())
            .annotate(text_id=Cast("pk", output_field=CharField()))
            .values("text_id")
        )
        events = events.filter(subject_type=RELEASE_SUBJECT, subject_id__in=ids)
    return events


RELEASE_COLUMNS = (
    "id",
    "service",
    "tier",
    "change_kind",
    "path",
    "risk",
    "state",
    "from_revision",
    "to_revision",
    "summary",
    "filed_by",
    "created_at",
    "submitted_at",
    "approved_at",
    "rollout_started_at",
    "closed_at",
    "emergency_reason",
    "rollback_target",
    "rollback_kind",
    "rollback_expected_minutes",
)
_RELEASE_FIELDS = (
    "pk",
    "service__slug",
    "service__tier",
    "change_kind",
    "path",
    "risk",
    "state",
    "from_revision__number",
    "to_revision__number",
    "summary",
    "filed_by__username",
    "created_at",
    "submitted_at",
    "approved_at",
    "rollout_started_at",
    "closed_at",
    "emergency_reason",
    "rollback_target__number",
    "rollback_kind",
    "rollback_expected_minutes",
)


def _label(number: int | None) -> str | None:
    return None if number is None else f"r{number}"


def _release_rows(releases: QuerySet[Release]) -> Iterator[tuple[Any, ...]]:
    for row in releases.order_by("pk").values_list(*_RELEASE_FIELDS).iterator(chunk_size=2000):
        values = list(row)
        for index in (7, 8, 17):  # revisions read as their labels, r1, r2
            values[index] = _label(values[index])
        yield tuple(values)


SIGNOFF_COLUMNS = (
    "id",
    "release",
    "service",
    "role",
    "signer",
    "decision",
    "comment",
    "snapshot_hash",
    "signed_at",
    "voided_at",
    "void_reason",
    "as_administrator",
)
_SIGNOFF_FIELDS = (
    "pk",
    "release_id",
    "release__service__slug",
    "role",
    "signer__username",
    "decision",
    "comment",
    "snapshot_hash",
    "signed_at",
    "voided_at",
    "void_reason",
    "as_administrator",
)

WAIVER_COLUMNS = (
    "id",
    "release",
    "service",
    "gate",
    "reason",
    "granted_by",
    "granted_at",
    "expires_at",
    "revoked_at",
    "revoked_by",
)
_WAIVER_FIELDS = (
    "pk",
    "release_id",
    "release__service__slug",
    "gate",
    "reason",
    "granted_by__username",
    "granted_at",
    "expires_at",
    "revoked_at",
    "revoked_by__username",
)


ROLLBACK_COLUMNS = (
    "id",
    "service",
    "release",
    "from_revision",
    "to_revision",
    "kind",
    "reason",
    "symptom",
    "recorded_by",
    "started_at",
    "finished_at",
    "expected_minutes",
    "state",
    "verification_run",
    "outcome_note",
)
_ROLLBACK_FIELDS = (
    "pk",
    "service__slug",
    "release_id",
    "from_revision__number",
    "to_revision__number",
    "kind",
    "reason",
    "symptom",
    "recorded_by__username",
    "started_at",
    "finished_at",
    "expected_minutes",
    "state",
    "verification_run_id",
    "outcome_note",
)


def _rollback_rows(rollbacks: QuerySet[RollbackEvent]) -> Iterator[tuple[Any, ...]]:
    for row in rollbacks.order_by("pk").values_list(*_ROLLBACK_FIELDS).iterator(chunk_size=2000):
        values = list(row)
        for index in (3, 4):  # revisions read as their labels
            values[index] = _label(values[index])
        yield tuple(values)


REVIEW_COLUMNS = (
    "id",
    "service",
    "tier",
    "state",
    "triggers",
    "raised_at",
    "due_on",
    "assignee",
    "overdue_since",
    "outcome",
    "conclusion",
    "concluded_by",
    "concluded_at",
    "next_due_on",
)
_REVIEW_FIELDS = (
    "pk",
    "service__slug",
    "service__tier",
    "state",
    "pk",  # replaced by the trigger kinds
    "raised_at",
    "due_on",
    "assignee__username",
    "overdue_since",
    "outcome",
    "conclusion",
    "concluded_by__username",
    "concluded_at",
    "next_due_on",
)


def _review_rows(reviews: QuerySet[Review]) -> Iterator[tuple[Any, ...]]:
    kinds: dict[int, list[str]] = {}
    for review_id, kind in (
        ReviewTrigger.objects.filter(review__in=reviews.values("pk"))
        .order_by("review_id", "pk")
        .values_list("review_id", "kind")
    ):
        kinds.setdefault(review_id, []).append(kind)
    for row in reviews.order_by("pk").values_list(*_REVIEW_FIELDS).iterator(chunk_size=2000):
        values = list(row)
        values[4] = " ".join(kinds.get(values[0], []))
        yield tuple(values)


def _values(fields: tuple[str, ...]) -> Callable[[QuerySet], Iterator[tuple[Any, ...]]]:
    def rows(queryset: QuerySet) -> Iterator[tuple[Any, ...]]:
        return queryset.order_by("pk").values_list(*fields).iterator(chunk_size=2000)

    return rows


def _event_rows(events: QuerySet[Event]) -> Iterator[tuple[Any, ...]]:
    return event_rows(events.order_by("sequence"))


@dataclass(frozen=True)
class RecordType:
    key: str
    # Shown on the auditor's page only (exports name a type by its key), so translated.
    label: StrOrPromise  # "Sign-offs"
    singular: StrOrPromise  # "sign-off"
    queryset: Callable[[AuditFilters], QuerySet]
    columns: tuple[str, ...]
    rows: Callable[[QuerySet], Iterator[tuple[Any, ...]]]
    # What a page of the table reads beyond the row itself, and in what order.
    page_related: tuple[str, ...] = field(default=())
    page_order: tuple[str, ...] = field(default=("-pk",))
    period_field: str = "created_at"

    @property
    def template(self) -> str:
        return f"releases/audit/_{self.key}.html"

    def page_queryset(self, filters: AuditFilters) -> QuerySet:
        return self.queryset(filters).select_related(*self.page_related).order_by(*self.page_order)


RECORD_TYPES: dict[str, RecordType] = {
    record.key: record
    for record in (
        RecordType(
            key="releases",
            label=_("Releases"),
            singular=_("release"),
            queryset=_releases,
            columns=RELEASE_COLUMNS,
            rows=_release_rows,
            page_related=("service", "from_revision", "to_revision", "filed_by"),
            page_order=("-created_at", "-id"),
        ),
        RecordType(
            key="signoffs",
            label=_("Sign-offs"),
            singular=_("sign-off"),
            queryset=_signoffs,
            columns=SIGNOFF_COLUMNS,
            rows=_values(_SIGNOFF_FIELDS),
            page_related=("release__service", "signer"),
            page_order=("-signed_at", "-id"),
            period_field="signed_at",
        ),
        RecordType(
            key="waivers",
            label=_("Waivers"),
            singular=_("waiver"),
            queryset=_waivers,
            columns=WAIVER_COLUMNS,
            rows=_values(_WAIVER_FIELDS),
            page_related=("release__service", "granted_by", "revoked_by"),
            page_order=("-granted_at", "-id"),
            period_field="granted_at",
        ),
        RecordType(
            key="rollbacks",
            label=_("Rollbacks"),
            singular=_("rollback"),
            queryset=_rollbacks,
            columns=ROLLBACK_COLUMNS,
            rows=_rollback_rows,
            page_related=("service", "release", "from_revision", "to_revision", "recorded_by"),
            page_order=("-started_at", "-id"),
            period_field="started_at",
        ),
        RecordType(
            key="reviews",
            label=_("Reviews"),
            singular=_("review"),
            queryset=_reviews,
            columns=REVIEW_COLUMNS,
            rows=_review_rows,
            page_related=("service", "assignee", "concluded_by"),
            page_order=("-raised_at", "-id"),
            period_field="raised_at",
        ),
        RecordType(
            key="events",
            label=_("Events"),
            singular=_("event"),
            queryset=_events,
            columns=EVENT_COLUMNS,
            rows=_event_rows,
            page_related=("service",),
            page_order=("-sequence",),
        ),
    )
}
