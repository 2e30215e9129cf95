"""Where a rollback of a service would go, and how: the rollback plan in force.

The plan is the rollback section of a release form. While a release is rolling out,
its plan is in force (rolling back withdraws the candidate's traffic); otherwise the
plan of the release that made the live revision live. With neither, the target is
the revision that served before the live one, read from the serving history, and
nothing else is known.

A revision rolled back off the service (`releases.governance.queries.rolled_back`) is never the
default target until a release puts it live again: the plan passes over it (to the
live revision while a rollout is in flight, else to the newest earlier revision not
rolled back) and says which one it passed over (`passed_over`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from django.db.models import Case, F, IntegerField, OuterRef, Q, QuerySet, Subquery, Value, When
from django.db.models.functions import JSONObject

from ledger import queries as ledger_queries
from ledger.models import Revision, Service
from lib.querysets import built_once
from releases.governance.queries.readiness import (
    HISTORY_READ,
    NO_TARGET,
    Readiness,
    Reason,
    rollback_readiness,
)
from releases.governance.queries.rolled_back import NewestRollback, RolledBack, service_rollbacks
from releases.models import Release


@dataclass(frozen=True)
class RollbackPlan:
    release: Release | None  # the release whose plan is in force
    target: Revision | None
    kind: str = ""
    triggers: list[str] = field(default_factory=list)
    expected_minutes: int | None = None
    impact_scope: str = ""
    verification_set: str = ""
    # The revision the plan (or the serving history) would have gone back to, passed
    # over because it was rolled back off the service.
    passed_over: RolledBack | None = None
    # Every revision rolled back off the service and not released since, by id.
    rolled_back: Mapping[int, RolledBack] = field(default_factory=dict)
    # The service's newest rollback: readiness asks whether its caches were flushed.
    newest_rollback: NewestRollback | None = None

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
    """The plan in force (two queries; two more to read the serving history when there
    is no release and the caller has not read it)."""
    return plan_for(service, plan_release(service), history=history)


def plan_for(
    service: Service,
    release: Release | None,
    *,
    history: list[ledger_queries.ServingInterval] | None = None,
    rolled_back: Mapping[int, RolledBack] | None = None,
    newest_rollback: NewestRollback | None = None,
) -> RollbackPlan:
    """The plan of `release` (read by `plan_release`), or the serving history's without
    one, passing over the revisions rolled back off the service (read with the service's
    newest rollback unless given)."""
    if rolled_back is None:
        read = service_rollbacks(service.pk)
        rolled_back, newest_rollback = read.rolled_back, read.newest
    plan = plan_of(release) if release is not None else RollbackPlan(release=None, target=None)
    return pass_over_rolled_back(
        service, plan, rolled_back, history, newest_rollback=newest_rollback
    )


def pass_over_rolled_back(
    service: Service,
    plan: RollbackPlan,
    rolled_back: Mapping[int, RolledBack],
    history: list[ledger_queries.ServingInterval] | None = None,
    *,
    newest_rollback: NewestRollback | None = None,
) -> RollbackPlan:
    """`plan` with a default target that was not rolled back off the service. Without a
    release, the target is found here, in the serving history (read unless given)."""
    plan = replace(plan, newest_rollback=newest_rollback)
    if plan.release is None:
        target, passed_over = _served_before(service, history, rolled_back)
        return replace(plan, target=target, passed_over=passed_over, rolled_back=rolled_back)
    planned = plan.target
    if planned is None or planned.pk not in rolled_back:
        return replace(plan, rolled_back=rolled_back)
    if plan.in_flight:
        # Rolling back then only takes the candidate's traffic away from what serves.
        target = service.live_revision
    else:
        target, _ = _served_before(service, None, rolled_back)
    return replace(
        plan, target=target, passed_over=rolled_back[planned.pk], rolled_back=rolled_back
    )


def _served_before(
    service: Service,
    history: list[ledger_queries.ServingInterval] | None,
    rolled_back: Mapping[int, RolledBack],
) -> tuple[Revision | None, RolledBack | None]:
    """The newest revision that served before the live one and was not rolled back off
    the service (with its asset and runtime), and the first one passed over for that."""
    if history is None:
        history = ledger_queries.serving_history(service, limit=HISTORY_READ)
    passed_over: RolledBack | None = None
    for interval in history:
        revision = interval.revision
        if revision is None or revision.pk == service.live_revision_id:
            continue
        if revision.pk in rolled_back:
            passed_over = passed_over or rolled_back[revision.pk]
            continue
        return revision, passed_over
    if passed_over is not None and len(history) < HISTORY_READ:
        # The caller read a short history: read far enough for another target.
        longer = ledger_queries.serving_history(service, limit=HISTORY_READ)
        if len(longer) > len(history):
            target, _ = _served_before(service, longer, rolled_back)
            return target, passed_over
    return None, passed_over


def plan_readiness(
    service: Service, plan: RollbackPlan, *, now: dt.datetime | None = None
) -> Readiness:
    """Whether the plan in force could be carried out now, with every reason."""
    if plan.target is None:
        if plan.passed_over is not None:
            return Readiness(
                "not ready",
                None,
                [
                    Reason(
                        "not ready",
                        f"there is no rollback target: {plan.passed_over.sentence(service.slug)}"
                        "; no release has put it live since, and no other earlier revision "
                        "has served",
                    )
                ],
            )
        return NO_TARGET
    return rollback_readiness(
        service,
        plan.target,
        expected_minutes=plan.expected_minutes,
        now=now,
        in_flight=plan.in_flight,
        planned=plan.release is not None,
        rolled_back=plan.rolled_back.get(plan.target.pk),
        newest_rollback=plan.newest_rollback,
    )
