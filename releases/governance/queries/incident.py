"""Everything the incident screen and its API answer, in one read with a fixed number of
queries: what is live and since when, whether a rollout is in flight, how it behaves,
where a rollback would go and whether that is safe, what to check for the symptom, what
changed lately, and who to call.

The queries: the service with its live revision, runbook, task types, open unauthorized
changes, rollback in progress and which release's plan is in force (1); that release
with its target's parts when the target is not the live revision (1, when there is
one), and its stages and their observations while it rolls out (2, as the release
page reads them: `releases.governance.queries.rollout.rollout_of`); the serving history (1, and 1 more for the revision
that served before when no release's plan is in force); the revisions rolled back off
the service (1, and the serving history again, 2, only when they include the plan's
target); health (3); the target's evidence, diff and last verification (3), and what
verifying it now would use (1); the changes of the window (1); the people (1).
Thirteen at most (fifteen while a rollout runs), on PostgreSQL and SQLite alike; the page adds one for the labels of
revisions its changes name that none of these read.

Most of a request's time went to Django building and compiling SQL, not to
PostgreSQL: the wide reads are built once per process (`lib.querysets.built_once`),
and values read together from one row come back as one JSON object per subquery.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db.models import (
    Case,
    Count,
    Exists,
    IntegerField,
    JSONField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
    Window,
)
from django.db.models.functions import JSONObject
from django.utils import timezone

from ledger import queries as ledger_queries
from ledger.models import Event, Revision, Service, Team
from ledger.models.contacts import tel_uri
from ledger.queries.serving import LIVE_CHANGED
from ledger.roles import Role
from ledger.validators import parse_image
from lib.aggregates import ListAgg, split
from lib.querysets import built_once
from releases.event_actions import SERVING_ACTIONS
from releases.governance import playbooks
from releases.governance.playbooks import Degradation, Playbook
from releases.governance.queries.plan import (
    RollbackPlan,
    pass_over_rolled_back,
    plan_in_force,
    plan_of,
    plan_readiness,
)
from releases.governance.queries.readiness import HISTORY_READ, Readiness
from releases.governance.queries.rolled_back import service_rollbacks
from releases.governance.queries.rollout import rollout_of
from releases.models import Release, RollbackEvent, Stage, UnauthorizedChange
from replay import queries as replay_queries

CHANGES_WINDOW = dt.timedelta(hours=72)
CHANGES_LISTED = 30
# Platform SREs and security & compliance people to call when the team has none.
ON_CALL_LISTED = 5


@dataclass(frozen=True)
class Owner:
    role: str
    name: str
    username: str
    email: str
    phone: str = ""

    @property
    def tel(self) -> str:
        return tel_uri(self.phone) if self.phone else ""


@dataclass(frozen=True)
class RolloutState:
    """The rollout in flight, as the incident screen needs it: read from the release
    page's `releases.governance.queries.rollout.Rollout`, so both say the same stage carries
    traffic."""

    release_id: int
    to_revision_label: str
    stage_number: int | None
    stages: int
    traffic_pct: float
    stage_state: str
    why: str
    breached: bool
    held: bool
    analysis: AnalysisState | None = None


@dataclass(frozen=True)
class AnalysisState:
    """The stage's analysis from Prometheus: measuring (and when next), or paused by whom."""

    interval_s: int
    next_at: dt.datetime | None  # the end of the window it measures next; None when paused
    paused_by: str  # a username; "" when it stopped itself or runs
    pause_reason: str


def analysis_state(stage: Stage | None, now: dt.datetime) -> AnalysisState | None:
    if stage is None or not stage.analysis or stage.started_at is None:
        return None
    interval = int(stage.analysis["interval_s"])
    if stage.analysis_paused_at is not None:
        by = stage.analysis_paused_by
        return AnalysisState(
            interval, None, by.get_username() if by else "", stage.analysis_pause_reason
        )
    done = int((now - stage.started_at).total_seconds() // interval)
    return AnalysisState(
        interval, stage.started_at + dt.timedelta(seconds=interval * (done + 1)), "", ""
    )


@dataclass(frozen=True)
class Finding:
    """The newest open unauthorized change, and how many are open."""

    open_count: int
    detected_at: dt.datetime | None
    found: list
    # engine (a probe of a backend) or gateway (the running gateway's routes).
    kind: str = UnauthorizedChange.Kind.ENGINE


@dataclass(frozen=True)
class RollbackInProgress:
    id: int
    state: str
    started_at: dt.datetime

    @property
    def label(self) -> str:
        return str(RollbackEvent.State(self.state).label)


@dataclass(frozen=True)
class Incident:
    service: Service
    serving: ledger_queries.ServingInterval | None
    image_digest: str | None
    health: replay_queries.Health
    plan: RollbackPlan
    readiness: Readiness
    rollout: RolloutState | None
    unauthorized: Finding | None
    rollback_in_progress: RollbackInProgress | None
    # What verifying the target now would use, and any verification under way.
    verification: replay_queries.VerificationMeans | None
    playbooks: list[Playbook]
    symptom: Playbook | None
    degradation: list[tuple[str, Degradation]]
    changes: list[Event]  # what changed what serves first (`serving_changes`), then the rest
    owners: list[Owner]
    now: dt.datetime
    changes_cut: bool = False  # more changed in the window than are listed

    @property
    def serving_changes(self) -> list[Event]:
        return [e for e in self.changes if e.action in SERVING_ACTIONS]

    @property
    def other_changes(self) -> list[Event]:
        return [e for e in self.changes if e.action not in SERVING_ACTIONS]

    @property
    def changes_since(self) -> dt.datetime:
        return self.now - CHANGES_WINDOW


def changed_revision_labels(screen: Incident) -> dict[int, str]:
    """The labels of the revisions the changes name as live, before or after, by id:
    those the screen has read, the rest in one query (none when it has them all)."""
    release = screen.plan.release
    known = [screen.service.live_revision, screen.plan.target]
    if release is not None:
        known.append(release.to_revision)
    labels = {revision.pk: revision.label for revision in known if revision is not None}
    named = {
        value
        for event in screen.changes
        if event.action == LIVE_CHANGED
        for side in ("before", "after")
        if isinstance(value := (event.payload_data.get(side) or {}).get("live_revision"), int)
    }
    if missing := named - labels.keys():
        for pk, number in Revision.objects.filter(pk__in=missing).values_list("pk", "number"):
            labels[pk] = Revision(number=number).label
    return labels


def incident_service(slug: str) -> Service:
    """The service with everything the screen reads about it (one query; DoesNotExist).

    Annotated: `task_type_list` (joined slugs); `newest_finding`, the newest open
    unauthorized change as `{"open": how many are open, "at"}`, and what it found
    (`newest_finding_found`); `open_rollback`, a rollback not finished, as
    `{"id", "state", "at"}`; `plan_in_force` (`plan.plan_in_force`).
    """
    service = _incident_services().get(slug=slug)
    if service.live_revision is not None:
        # Its own service, without joining the service table a second time.
        service.live_revision.service = service
    return service


@built_once
def _incident_services() -> QuerySet[Service]:
    """`newest_finding`, `open_rollback` and `plan_in_force` are each one subquery
    returning a JSON object, not one per value: Django compiles a subquery in about a
    millisecond, on every request."""
    findings = UnauthorizedChange.objects.filter(
        service=OuterRef("pk"), reconciled_at__isnull=True
    ).order_by("-detected_at", "-pk")
    unfinished = RollbackEvent.objects.filter(
        service=OuterRef("pk"),
        state__in=(RollbackEvent.State.VERIFYING, RollbackEvent.State.AWAITING_CONFIRMATION),
    ).order_by("-started_at", "-pk")
    return Service.objects.select_related(
        "team",
        "runbook",
        "gateway_check",
        "live_revision__model_asset",
        "live_revision__runtime",
        "live_revision__gateway_policy",
    ).annotate(
        # An aggregate in a subquery: on the service row itself it would GROUP BY
        # every column of six joined tables, which PostgreSQL plans slowly.
        task_type_list=Subquery(
            Service.task_types.through.objects.filter(service=OuterRef("pk"))
            .order_by()
            .values("service")
            .annotate(slugs=ListAgg("tasktype__slug"))
            .values("slugs")  # type: ignore[misc]  # the stubs do not see the annotation
        ),
        newest_finding=Subquery(
            # The window counts every open finding before LIMIT keeps the newest.
            findings.values(
                row=JSONObject(open=Window(Count("pk")), at="detected_at", kind="kind")
            )[:1]
        ),
        # Not in the object: SQLite would put a JSON column there as a string.
        newest_finding_found=Subquery(findings.values("found")[:1], output_field=JSONField()),
        open_rollback=Subquery(
            unfinished.values(row=JSONObject(id="pk", state="state", at="started_at"))[:1]
        ),
        plan_in_force=plan_in_force(),
    )


# Who is called when the service's team holds nobody of these roles.
ON_CALL_ROLES = (Role.PLATFORM_SRE, Role.SECURITY_COMPLIANCE)


def _owners(service: Service) -> list[Owner]:
    """The team's people by role; for an on-call role the team lacks, the first people
    outside it who hold that role (one query over people's roles)."""
    user_model = get_user_model()
    membership = Team.members.through.objects.filter(team=service.team_id, user=OuterRef("user"))
    rows = (
        user_model.groups.through.objects.filter(user__is_active=True, group__name__in=Role.values)
        .annotate(in_team=Exists(membership))
        .filter(Q(in_team=True) | Q(group__name__in=ON_CALL_ROLES))
        .values_list(  # type: ignore[misc]  # the stubs do not see the annotation
            "group__name",
            "in_team",
            "user__username",
            "user__first_name",
            "user__last_name",
            "user__email",
            "user__contact__phone",  # a left join in the same query: no query per person
        )
        .order_by("user__username", "group__name")
    )
    owners: list[Owner] = []
    outside: dict[str, list[Owner]] = {}
    for role, in_team, username, first, last, email, phone in rows:
        owner = Owner(role, f"{first} {last}".strip() or username, username, email, phone or "")
        if in_team:
            owners.append(owner)
        else:
            outside.setdefault(role, []).append(owner)
    held = {owner.role for owner in owners}
    for role in ON_CALL_ROLES:
        if role not in held:
            owners.extend(outside.get(role, [])[:ON_CALL_LISTED])
    order = list(Role.values)
    return sorted(owners, key=lambda o: (order.index(o.role), o.username))


def _moment(text: str) -> dt.datetime:
    """A moment the database wrote into JSON: ISO 8601 with its offset (PostgreSQL), or
    in UTC without one (SQLite, as Django stores it there)."""
    moment = dt.datetime.fromisoformat(text)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=dt.UTC)


def _rollout(plan: RollbackPlan, now: dt.datetime) -> RolloutState | None:
    release = plan.release
    if release is None or not plan.in_flight:
        return None
    rollout = rollout_of(release)
    stage = rollout.current.stage if rollout is not None and rollout.current else None
    return RolloutState(
        release_id=release.pk,
        to_revision_label=release.to_revision.label,
        stage_number=stage.number if stage else None,
        stages=len([s for s in release.gray_stages if isinstance(s, dict)]) or 1,
        traffic_pct=rollout.traffic_pct if rollout is not None else 0.0,
        stage_state=stage.state if stage else "",
        why=stage.state_reason if stage else "",
        breached=rollout is not None and rollout.breached,
        held=rollout is not None and rollout.held,
        analysis=analysis_state(stage, now),
    )


def _plan_with_stage(service: Service) -> RollbackPlan:
    """The plan in force, read only when the service row named its release, in one
    query joining its target's parts only when the target is not the live revision
    (which the service row holds, as it does while a rollout runs)."""
    named = getattr(service, "plan_in_force", None)
    if not named:
        return RollbackPlan(release=None, target=None)
    target_id = named["rollback_target"] or named["from_revision"]
    live = service.live_revision
    on_live = live is not None and live.pk == target_id
    if target_id is None or on_live:
        target_path = ""  # no target, or the live revision: nothing to join
    else:
        target_path = "rollback_target" if named["rollback_target"] else "from_revision"
    release = _releases_with_target(target_path).filter(pk=named["id"]).first()
    if release is None:
        return RollbackPlan(release=None, target=None)
    return plan_of(release, target=live if on_live else None)


@built_once
def _releases_with_target(target_path: str) -> QuerySet[Release]:
    """The plan's release with its to-revision and its target at `target_path` with the
    target's asset and runtime (none for ""). Its rollout, while one runs, is read as the
    release page reads it (`rollout_of`)."""
    parts = (f"{target_path}__model_asset", f"{target_path}__runtime") if target_path else ()
    return Release.objects.select_related("to_revision", *parts)


def incident(service: Service, *, symptom: str = "", now: dt.datetime | None = None) -> Incident:
    now = now or timezone.now()
    live = service.live_revision
    plan = _plan_with_stage(service)
    # With a plan in force only the newest interval is read, for "since"; without one,
    # the revision that served before is the target, and its parts are loaded.
    planned = plan.release is not None
    history = ledger_queries.serving_history(
        service, limit=1 if planned else HISTORY_READ, with_revisions=not planned
    )
    # Never back to a revision rolled back off the service; with a plan whose target was,
    # the history is read again, far enough for another.
    rollbacks = service_rollbacks(service.pk)
    plan = pass_over_rolled_back(
        service,
        plan,
        rollbacks.rolled_back,
        None if planned else history,
        newest_rollback=rollbacks.newest,
    )
    serving = (
        history[0] if history and live is not None and history[0].revision_id == live.pk else None
    )
    runbook = getattr(service, "runbook", None)
    tier_playbooks = playbooks.playbooks_for(service.tier, runbook.playbooks if runbook else None)
    chosen = next((p for p in tier_playbooks if p.mode == symptom), None)
    # Changes to what serves first, then the rest, each newest first; one more row than
    # listed says whether the list is cut (the page then links to the whole period).
    serving_first = Case(
        When(action__in=SERVING_ACTIONS, then=Value(0)),
        default=Value(1),
        output_field=IntegerField(),
    )
    changes = list(
        Event.objects.filter(service=service, created_at__gte=now - CHANGES_WINDOW)
        .annotate(serving_first=serving_first)
        .order_by("serving_first", "-sequence")[: CHANGES_LISTED + 1]
    )
    finding = getattr(service, "newest_finding", None)
    rollback = getattr(service, "open_rollback", None)
    return Incident(
        service=service,
        serving=serving,
        image_digest=parse_image(live.runtime.image).digest if live is not None else None,
        health=replay_queries.live_health(service, now=now),
        plan=plan,
        readiness=plan_readiness(service, plan, now=now),
        rollout=_rollout(plan, now),
        unauthorized=(
            Finding(
                finding["open"],
                _moment(finding["at"]),
                service.newest_finding_found or [],  # type: ignore[attr-defined]
                finding.get("kind") or UnauthorizedChange.Kind.ENGINE,
            )
            if finding
            else None
        ),
        rollback_in_progress=(
            RollbackInProgress(rollback["id"], rollback["state"], _moment(rollback["at"]))
            if rollback
            else None
        ),
        verification=(
            replay_queries.verification_means(plan.target) if plan.target is not None else None
        ),
        playbooks=tier_playbooks,
        symptom=chosen,
        degradation=[
            (slug, playbooks.degradation_for(slug, runbook.degradation if runbook else None))
            for slug in split(getattr(service, "task_type_list", ""))
        ],
        changes=changes[:CHANGES_LISTED],
        changes_cut=len(changes) > CHANGES_LISTED,
        owners=_owners(service),
        now=now,
    )
