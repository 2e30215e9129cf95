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

Revisions and gateway policy versions are records of what the others name: the
revisions of the selection are those its releases and rollbacks name (from, to,
rollback target) and, unless a release filter is set, those made in the period; the
policy versions are the ones those revisions run with, whenever they were recorded.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from django.db.models import (
    BooleanField,
    CharField,
    ExpressionWrapper,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
)
from django.db.models.functions import Cast
from django.utils.translation import gettext_lazy as _

from ledger.chain import canonical_json
from ledger.exports.events import EVENT_COLUMNS, event_rows
from ledger.models import Event, GatewayPolicy, Revision
from releases.models import (
    Drill,
    Release,
    Review,
    ReviewTrigger,
    RollbackEvent,
    SignOff,
    Waiver,
)

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


def _drills(filters: AuditFilters) -> QuerySet[Drill]:
    drills = Drill.objects.filter(filters.period_q("created_at"))
    scope = Q()
    if filters.service:
        scope &= Q(services__slug=filters.service)
    if filters.tier:
        scope &= Q(services__tier=filters.tier)
    if scope:
        drills = drills.filter(pk__in=Drill.objects.filter(scope).values("pk"))
    if filters.narrows_releases:
        # A drill rehearses services, never a release: no release filter matches it.
        drills = drills.none()
    return drills


def _revisions(filters: AuditFilters) -> QuerySet[Revision]:
    releases = _releases(filters)
    rollbacks = _rollbacks(filters)
    # `pk IN (SELECT from_revision_id …)`: a release with no from-revision adds a NULL,
    # which matches nothing.
    named = (
        Q(pk__in=releases.values("from_revision"))
        | Q(pk__in=releases.values("to_revision"))
        | Q(pk__in=releases.values("rollback_target"))
        | Q(pk__in=rollbacks.values("from_revision"))
        | Q(pk__in=rollbacks.values("to_revision"))
    )
    if not filters.narrows_releases:
        # As the events do: a release filter keeps only what releases name.
        made = filters.period_q("created_at")
        if filters.service:
            made &= Q(service__slug=filters.service)
        if filters.tier:
            made &= Q(service__tier=filters.tier)
        named |= made
    return Revision.objects.filter(named)


def _gateway_policies(filters: AuditFilters) -> QuerySet[GatewayPolicy]:
    return GatewayPolicy.objects.filter(pk__in=_revisions(filters).values("gateway_policy"))


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


@dataclass(frozen=True)
class Column:
    """One column of a record type's export: its header, the field it reads (through
    `values_list`), and how a value is written when not as read."""

    name: str
    field: str
    write: Callable[[Any], Any] | None = None


def _label(number: int | None) -> str | None:
    return None if number is None else f"r{number}"


def revision(name: str, field: str) -> Column:
    """A revision, read by its number and written as its label (r1, r2)."""
    return Column(name, field, _label)


def rows_of(columns: tuple[Column, ...]) -> Callable[[QuerySet], Iterator[tuple[Any, ...]]]:
    """A record type's rows: its columns' fields, in id order, each written its way."""
    fields = [column.field for column in columns]
    writes = [column.write for column in columns]

    def rows(queryset: QuerySet) -> Iterator[tuple[Any, ...]]:
        for row in queryset.order_by("pk").values_list(*fields).iterator(chunk_size=2000):
            yield tuple(
                value if write is None else write(value)
                for value, write in zip(row, writes, strict=True)
            )

    return rows


RELEASE_COLUMNS = (
    Column("id", "pk"),
    Column("service", "service__slug"),
    Column("tier", "service__tier"),
    Column("change_kind", "change_kind"),
    Column("path", "path"),
    Column("risk", "risk"),
    Column("state", "state"),
    revision("from_revision", "from_revision__number"),
    revision("to_revision", "to_revision__number"),
    Column("summary", "summary"),
    Column("filed_by", "filed_by__username"),
    Column("created_at", "created_at"),
    Column("submitted_at", "submitted_at"),
    Column("approved_at", "approved_at"),
    Column("rollout_started_at", "rollout_started_at"),
    Column("closed_at", "closed_at"),
    Column("emergency_reason", "emergency_reason"),
    revision("rollback_target", "rollback_target__number"),
    Column("rollback_kind", "rollback_kind"),
    Column("rollback_expected_minutes", "rollback_expected_minutes"),
)

SIGNOFF_COLUMNS = (
    Column("id", "pk"),
    Column("release", "release_id"),
    Column("service", "release__service__slug"),
    Column("role", "role"),
    Column("signer", "signer__username"),
    Column("decision", "decision"),
    Column("comment", "comment"),
    Column("snapshot_hash", "snapshot_hash"),
    Column("signed_at", "signed_at"),
    Column("voided_at", "voided_at"),
    Column("void_reason", "void_reason"),
    Column("as_administrator", "as_administrator"),
)

WAIVER_COLUMNS = (
    Column("id", "pk"),
    Column("release", "release_id"),
    Column("service", "release__service__slug"),
    Column("gate", "gate"),
    Column("reason", "reason"),
    Column("granted_by", "granted_by__username"),
    Column("granted_at", "granted_at"),
    Column("expires_at", "expires_at"),
    Column("revoked_at", "revoked_at"),
    Column("revoked_by", "revoked_by__username"),
)

ROLLBACK_COLUMNS = (
    Column("id", "pk"),
    Column("service", "service__slug"),
    Column("release", "release_id"),
    revision("from_revision", "from_revision__number"),
    revision("to_revision", "to_revision__number"),
    Column("kind", "kind"),
    Column("reason", "reason"),
    Column("symptom", "symptom"),
    Column("recorded_by", "recorded_by__username"),
    Column("started_at", "started_at"),
    Column("finished_at", "finished_at"),
    Column("expected_minutes", "expected_minutes"),
    Column("state", "state"),
    Column("verification_run", "verification_run_id"),
    Column("outcome_note", "outcome_note"),
)

# `triggers` reads the review's id; its rows write the trigger kinds in its place.
REVIEW_COLUMNS = (
    Column("id", "pk"),
    Column("service", "service__slug"),
    Column("tier", "service__tier"),
    Column("state", "state"),
    Column("triggers", "pk"),
    Column("raised_at", "raised_at"),
    Column("due_on", "due_on"),
    Column("assignee", "assignee__username"),
    Column("overdue_since", "overdue_since"),
    Column("outcome", "outcome"),
    Column("conclusion", "conclusion"),
    Column("concluded_by", "concluded_by__username"),
    Column("concluded_at", "concluded_at"),
    Column("next_due_on", "next_due_on"),
)


def _joined(
    columns: tuple[Column, ...], name: str, values: dict[int, list[str]]
) -> tuple[Column, ...]:
    """The columns, with `name` (which reads the row's id) written as the row's values
    joined by spaces: what a row has many of (a review's triggers, a drill's services)."""
    return tuple(
        replace(column, write=lambda pk: " ".join(values.get(pk, [])))
        if column.name == name
        else column
        for column in columns
    )


def _review_rows(reviews: QuerySet[Review]) -> Iterator[tuple[Any, ...]]:
    kinds: dict[int, list[str]] = {}
    for review_id, kind in (
        ReviewTrigger.objects.filter(review__in=reviews.values("pk"))
        .order_by("review_id", "pk")
        .values_list("review_id", "kind")
    ):
        kinds.setdefault(review_id, []).append(kind)
    return rows_of(_joined(REVIEW_COLUMNS, "triggers", kinds))(reviews)


DRILL_COLUMNS = (
    Column("id", "pk"),
    Column("name", "name"),
    Column("business_event", "business_event"),
    Column("services", "pk"),
    Column("state", "state"),
    Column("window_starts_at", "window_starts_at"),
    Column("window_ends_at", "window_ends_at"),
    Column("revision", "revision_id"),
    Column("mix", "mix", canonical_json),
    Column("arrival", "arrival", canonical_json),
    Column("bounds", "bounds", canonical_json),
    Column("capacity", "capacity", canonical_json),
    Column("seed", "seed"),
    Column("in_flight_ceiling", "in_flight_ceiling"),
    Column("signers", "signers", canonical_json),
    Column("results", "results", canonical_json),
    Column("ran_at", "ran_at"),
    Column("conclusion", "conclusion", canonical_json),
    Column("concluded_by", "concluded_by__username"),
    Column("concluded_at", "concluded_at"),
    Column("created_by", "created_by__username"),
    Column("created_at", "created_at"),
)


def _drill_rows(drills: QuerySet[Drill]) -> Iterator[tuple[Any, ...]]:
    services: dict[int, list[str]] = {}
    for drill_id, slug in (
        Drill.services.through.objects.filter(drill__in=drills.values("pk"))
        .order_by("drill_id", "service__slug")
        .values_list("drill_id", "service__slug")
    ):
        services.setdefault(drill_id, []).append(slug)
    return rows_of(_joined(DRILL_COLUMNS, "services", services))(drills)


# `gateway_policy_known` and the event's columns are annotations (`_revision_rows`,
# `_gateway_policy_rows`).
REVISION_COLUMNS = (
    Column("id", "pk"),
    Column("service", "service__slug"),
    revision("revision", "number"),
    Column("fingerprint", "fingerprint"),
    Column("model_asset", "model_asset__name"),
    Column("runtime", "runtime__image"),
    Column("context_limit", "context_limit"),
    Column("gateway_policy", "gateway_policy__label"),
    Column("gateway_policy_known", "gateway_policy_known"),
    Column("gateway_policy_sha256", "gateway_policy__sha256"),
    revision("based_on", "based_on__number"),
    Column("created_by", "created_by__username"),
    Column("created_at", "created_at"),
    Column("served_at", "served_at"),
)


def _known(prefix: str = "") -> ExpressionWrapper:
    """A policy version is known when it has a document (SQL NULL when recorded by
    name only)."""
    return ExpressionWrapper(Q(**{f"{prefix}document__isnull": False}), output_field=BooleanField())


def _revision_rows(revisions: QuerySet[Revision]) -> Iterator[tuple[Any, ...]]:
    return rows_of(REVISION_COLUMNS)(
        revisions.annotate(gateway_policy_known=_known("gateway_policy__"))
    )


def _document(document: Any) -> str | None:
    """The document as the canonical JSON its sha256 was computed over, so that the
    cell itself can be hashed and compared; None when the version is unknown."""
    return None if document is None else canonical_json(document)


GATEWAY_POLICY_COLUMNS = (
    Column("id", "pk"),
    Column("service", "service__slug"),
    Column("version", "version"),
    Column("label", "label"),
    Column("known", "document_known"),
    Column("sha256", "sha256"),
    Column("document", "document", _document),
    Column("note", "note"),
    Column("created_by", "created_by__username"),
    Column("created_at", "created_at"),
    Column("event_sequence", "event_sequence"),
    Column("event_hash", "event_hash"),
)
GATEWAY_POLICY_SUBJECT = GatewayPolicy._meta.label_lower  # as ledger.chain.subject_of names it


def _gateway_policy_rows(policies: QuerySet[GatewayPolicy]) -> Iterator[tuple[Any, ...]]:
    # The Event that recorded the version (versions migrated from the free names of
    # before had none: their columns are empty). ledger_event_subject_idx answers it.
    created = Event.objects.filter(
        subject_type=GATEWAY_POLICY_SUBJECT,
        subject_id=Cast(OuterRef("pk"), output_field=CharField()),
        action="gateway_policy.created",
    ).order_by("sequence")
    return rows_of(GATEWAY_POLICY_COLUMNS)(
        policies.annotate(
            document_known=_known(),
            event_sequence=Subquery(created.values("sequence")[:1]),
            event_hash=Subquery(created.values("hash")[:1]),
        )
    )


EVENTS = tuple(Column(name, name) for name in EVENT_COLUMNS)  # headers only: rows are ledger's


def _event_rows(events: QuerySet[Event]) -> Iterator[tuple[Any, ...]]:
    return event_rows(events.order_by("sequence"))


@dataclass(frozen=True)
class RecordType:
    key: str
    # Shown on the auditor's page only (exports name a type by its key), so translated.
    label: StrOrPromise  # "Sign-offs"
    singular: StrOrPromise  # "sign-off"
    queryset: Callable[[AuditFilters], QuerySet]
    spec: tuple[Column, ...]
    rows: Callable[[QuerySet], Iterator[tuple[Any, ...]]]
    # What a page of the table reads beyond the row itself, and in what order.
    page_related: tuple[str, ...] = field(default=())
    page_order: tuple[str, ...] = field(default=("-pk",))
    period_field: str = "created_at"

    @property
    def columns(self) -> tuple[str, ...]:
        """The export's header."""
        return tuple(column.name for column in self.spec)

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
            spec=RELEASE_COLUMNS,
            rows=rows_of(RELEASE_COLUMNS),
            page_related=("service", "from_revision", "to_revision", "filed_by"),
            page_order=("-created_at", "-id"),
        ),
        RecordType(
            key="signoffs",
            label=_("Sign-offs"),
            singular=_("sign-off"),
            queryset=_signoffs,
            spec=SIGNOFF_COLUMNS,
            rows=rows_of(SIGNOFF_COLUMNS),
            page_related=("release__service", "signer"),
            page_order=("-signed_at", "-id"),
            period_field="signed_at",
        ),
        RecordType(
            key="waivers",
            label=_("Waivers"),
            singular=_("waiver"),
            queryset=_waivers,
            spec=WAIVER_COLUMNS,
            rows=rows_of(WAIVER_COLUMNS),
            page_related=("release__service", "granted_by", "revoked_by"),
            page_order=("-granted_at", "-id"),
            period_field="granted_at",
        ),
        RecordType(
            key="rollbacks",
            label=_("Rollbacks"),
            singular=_("rollback"),
            queryset=_rollbacks,
            spec=ROLLBACK_COLUMNS,
            rows=rows_of(ROLLBACK_COLUMNS),
            page_related=("service", "release", "from_revision", "to_revision", "recorded_by"),
            page_order=("-started_at", "-id"),
            period_field="started_at",
        ),
        RecordType(
            key="reviews",
            label=_("Reviews"),
            singular=_("review"),
            queryset=_reviews,
            spec=REVIEW_COLUMNS,
            rows=_review_rows,
            page_related=("service", "assignee", "concluded_by"),
            page_order=("-raised_at", "-id"),
            period_field="raised_at",
        ),
        RecordType(
            key="drills",
            label=_("Drills"),
            singular=_("drill"),
            queryset=_drills,
            spec=DRILL_COLUMNS,
            rows=_drill_rows,
            page_related=("created_by", "concluded_by"),
            page_order=("-created_at", "-id"),
        ),
        RecordType(
            key="revisions",
            label=_("Revisions"),
            singular=_("revision"),
            queryset=_revisions,
            spec=REVISION_COLUMNS,
            rows=_revision_rows,
            page_related=("service", "gateway_policy", "created_by"),
            page_order=("-created_at", "-id"),
        ),
        RecordType(
            key="gateway_policies",
            label=_("Gateway policies"),
            singular=_("gateway policy version"),
            queryset=_gateway_policies,
            spec=GATEWAY_POLICY_COLUMNS,
            rows=_gateway_policy_rows,
            page_related=("service", "created_by"),
            page_order=("-created_at", "-id"),
        ),
        RecordType(
            key="events",
            label=_("Events"),
            singular=_("event"),
            queryset=_events,
            spec=EVENTS,
            rows=_event_rows,
            page_related=("service",),
            page_order=("-sequence",),
        ),
    )
}
