"""Everything the incident screen and its API answer, in one read with a fixed number of
queries: what is live and since when, how it behaves, where a rollback would go and
whether that is safe, what to check for the symptom, what changed lately, and who to
call."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.contrib.postgres.aggregates import ArrayAgg
from django.db.models import Exists, OuterRef, Q, Value
from django.utils import timezone

from ledger import queries as ledger_queries
from ledger.models import Event, Service, Team
from ledger.roles import Role
from ledger.validators import parse_image
from releases import playbooks
from releases.playbooks import Degradation, Playbook
from releases.queries.readiness import (
    HISTORY_READ,
    Readiness,
    previous_live_revision,
    rollback_readiness,
)
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


@dataclass(frozen=True)
class Incident:
    service: Service
    serving: ledger_queries.ServingInterval | None
    image_digest: str | None
    health: replay_queries.Health
    readiness: Readiness
    playbooks: list[Playbook]
    symptom: Playbook | None
    degradation: list[tuple[str, Degradation]]
    changes: list[Event]
    owners: list[Owner]
    now: dt.datetime


def incident_service(slug: str) -> Service:
    """The service with everything the screen reads about it, its task types' slugs as
    `task_type_slugs` (one query; DoesNotExist)."""
    return (
        Service.objects.select_related(
            "team",
            "live_revision__model_asset__license",
            "live_revision__runtime",
            "live_revision__service",
        )
        .annotate(
            task_type_slugs=ArrayAgg(
                "task_types__slug", filter=Q(task_types__isnull=False), default=Value([])
            )
        )
        .get(slug=slug)
    )


# Who is called when the service's team holds nobody of these roles.
ON_CALL_ROLES = (Role.PLATFORM_SRE, Role.SECURITY_COMPLIANCE)


def _owners(service: Service) -> list[Owner]:
    """The team's people by role; for an on-call role the team lacks, the first people
    outside it who hold that role (one query, their role names aggregated)."""
    user_model = get_user_model()
    membership = Team.members.through.objects.filter(team=service.team_id, user=OuterRef("pk"))
    on_call = user_model.groups.through.objects.filter(
        user=OuterRef("pk"), group__name__in=ON_CALL_ROLES
    )
    people = list(
        user_model.objects.filter(is_active=True)
        .annotate(
            in_team=Exists(membership),
            role_names=ArrayAgg("groups__name", filter=Q(groups__isnull=False), default=Value([])),
        )
        .filter(Q(in_team=True) | Exists(on_call))
        .order_by("username")
    )
    owners: list[Owner] = []
    for person in people:
        if person.in_team:
            owners.extend(_owner(role, person) for role in person.role_names if role in Role.values)
    held = {owner.role for owner in owners}
    for role in ON_CALL_ROLES:
        if role not in held:
            outside = [p for p in people if not p.in_team and role in p.role_names]
            owners.extend(_owner(role, person) for person in outside[:ON_CALL_LISTED])
    order = list(Role.values)
    return sorted(owners, key=lambda o: (order.index(o.role), o.username))


def _owner(role: str, user: User) -> Owner:
    return Owner(role, user.get_full_name() or user.username, user.username, user.email)


def incident(service: Service, *, symptom: str = "", now: dt.datetime | None = None) -> Incident:
    now = now or timezone.now()
    live = service.live_revision
    history = ledger_queries.serving_history(service, limit=HISTORY_READ)
    # The newest interval is what serves now, unless the column and the chain disagree.
    serving = (
        history[0] if history and live is not None and history[0].revision_id == live.pk else None
    )
    tier_playbooks = playbooks.playbooks_for(service.tier)
    chosen = next((p for p in tier_playbooks if p.mode == symptom), None)
    changes = list(
        Event.objects.filter(service=service, created_at__gte=now - CHANGES_WINDOW).order_by(
            "-sequence"
        )[:CHANGES_LISTED]
    )
    return Incident(
        service=service,
        serving=serving,
        image_digest=parse_image(live.runtime.image).digest if live is not None else None,
        health=replay_queries.live_health(service, now=now),
        readiness=rollback_readiness(service, previous_live_revision(service, history), now=now),
        playbooks=tier_playbooks,
        symptom=chosen,
        degradation=[
            (slug, playbooks.degradation_for(slug))
            for slug in service.task_type_slugs  # type: ignore[attr-defined]  # annotated
        ],
        changes=changes,
        owners=_owners(service),
        now=now,
    )
