"""Where a rollback of a service would go, and how: the rollback plan in force.

The plan is the rollback section of a release form. While a release is rolling out,
its plan is in force (rolling back withdraws the candidate's traffic); otherwise the
plan of the release that made the live revision live. With neither, the target is
the revision that served before the live one, read from the serving history, and
nothing else is known.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Case, F, IntegerField, OuterRef, Q, QuerySet, Subquery, Value, When
from django.db.models.functions import JSONObject

from ledger import queries as ledger_queries
from ledger.models import Revision, Service
from lib.querysets import built_once
from releases.models import Release
from releases.queries.readiness import (
    NO_TARGET,
    Readiness,
    previous_live_revision,
    rollback_readiness,
)


@dataclass(frozen=True)
class RollbackPlan:
    release: Release | None  # the release whose plan is in force
    target: Revision | None
    kind: str = ""
    triggers: list[str] = field(default_factory=list)
    expected_minutes: int | None = None
    impact_scope: str = ""
    verification_set: str = ""

    @property
    def in_flight(self) -> bool:
        """A rollout is running: rolling back takes the candidate's traffic away."""
        return self.release is not None and self.release.state == Release.State.ROLLING_OUT

    @property
    def kind_label(self) -> str:
        return Release.RollbackKind(self.kind).label if self.kind else ""


# What judging the target reads (its asset's lifecycle, its runtime's image, the diff
# from live); each further join costs PostgreSQL planning time on every incident.
_TARGET_PARTS = (
    "rollback_target__model_asset",
    "rollback_target__runtime",
    "from_revision__model_asset",
    "from_revision__runtime",
)


def _in_force(releases: QuerySet[Release], live_revision: Any) -> QuerySet[Release]:
    """Rolling out, or released and what is live; the rolling-out one first."""
    return (
        releases.filter(
            Q(state=Release.State.ROLLING_OUT)
            | Q(state=Release.State.RELEASED, to_revision_id=live_revision)
        )
        .annotate(
            in_flight=Case(
                When(state=Release.State.ROLLING_OUT, then=Value(0)),
                default=Value(1),
                output_field=IntegerField(),
            )
        )
        .order_by("in_flight", "-closed_at", "-pk")
    )


def _in_force_for_outer_service() -> QuerySet[Release]:
    """`_in_force` for the service of the outer query (an annotation of services)."""
    releases = Release.objects.filter(service=OuterRef("pk"))
    return _in_force(releases, OuterRef("live_revision_id"))


def plan_release_id() -> Subquery:
    """The id of the release whose plan is in force, as an annotation of services."""
    return Subquery(_in_force_for_outer_service().values("pk")[:1])


def plan_in_force() -> Subquery:
    """The release whose plan is in force, as an annotation of services: a JSON object
    `{"id", "rollback_target", "from_revision"}` (ids), or null."""
    row = JSONObject(
        id="pk", rollback_target="rollback_target_id", from_revision="from_revision_id"
    )
    return Subquery(_in_force_for_outer_service().values(row=row)[:1])


def plan_release(service: Service, *, pk: int | None = None) -> Release | None:
    """The release rolling out on the service, else the released one that made its live
    revision live (one query, the targets' parts loaded); or the release `pk` found so
    by `plan_release_id`."""
    releases = _releases()
    if pk is not None:
        return releases.filter(pk=pk).first()
    # Compared in SQL with what is live now, not with a copy of the service row.
    return _in_force(releases.filter(service=service), F("service__live_revision_id")).first()


@built_once
def _releases() -> QuerySet[Release]:
    return Release.objects.select_related("to_revision", *_TARGET_PARTS)


def plan_of(release: Release, *, target: Revision | None = None) -> RollbackPlan:
    """The release's plan; `target`, its target with its asset and runtime, when the
    caller has read it (else the release was read with its targets' parts)."""
    return RollbackPlan(
        release=release,
        target=target or release.rollback_target or release.from_revision,
        kind=release.rollback_kind,
        triggers=[str(t) for t in release.rollback_triggers if isinstance(t, str)],
        expected_minutes=release.rollback_expected_minutes,
        impact_scope=release.rollback_impact_scope,
        verification_set=release.rollback_verification_set,
    )


def rollback_plan(
    service: Service, history: list[ledger_queries.ServingInterval] | None = None
) -> RollbackPlan:
    """The plan in force (one query; two more to read the serving history when there is
    no release and the caller has not read it)."""
    release = plan_release(service)
    if release is not None:
        return plan_of(release)
    return RollbackPlan(release=None, target=previous_live_revision(service, history))


def plan_readiness(
    service: Service, plan: RollbackPlan, *, now: dt.datetime | None = None
) -> Readiness:
    """Whether the plan in force could be carried out now, with every reason."""
    if plan.target is None:
        return NO_TARGET
    return rollback_readiness(
        service,
        plan.target,
        expected_minutes=plan.expected_minutes,
        now=now,
        in_flight=plan.in_flight,
        planned=plan.release is not None,
    )
