"""What the gateway should be doing now, read from the ledger: each live service's
backends, weighted by the rollout in force, and its gateway policy in force.

- The live revision's routed backends carry the traffic (`Backend.routed`, apart from
  replay's `enabled`: a backend replay does not monitor still serves); while a release
  rolls out, its candidate's routed backends carry the share of the stage carrying traffic
  (`queries.rollout.carrying_traffic`: observing, held or breached — a hold or a
  breach keeps the share until a person or the analysis acts). A promotion changes
  the share at once; an abort or a rollback ends the rollout, and the candidate gets
  nothing.
- A side with no routed backend cannot carry its share: a candidate with none gets
  nothing (its share stays on the live backends), and a service whose live revision
  has none sends everything to the candidate's; a service with no backend at all is
  left out, and `Gateway.unrouted` names it.
- The policy is the live revision's version (the one in force); a version known by
  name only renders no limit.

Four queries, however many services: services, rollouts, their stages, backends.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import Max, Q

from ledger.models import Event, GatewayPolicy, Service
from ledger.queries.diff import Change
from ledger.queries.policy_diff import policy_changes
from ledger.services.gateway_policies import document_problems
from releases.gateway import litellm
from releases.gateway.litellm import (
    Deployment,
    GatewayMetrics,
    ServiceRoute,
    deployment_id,
    render_config,
    render_yaml,
    split_weights,
)
from releases.gateway.metrics import ServiceNames
from releases.governance.queries.rollout import carrying_traffic
from releases.models import Release, Stage
from replay.client import api_root
from replay.models import Backend


@dataclass(frozen=True)
class Gateway:
    routes: list[ServiceRoute]
    # Live services with no routed backend: the gateway cannot send them anything.
    unrouted: list[str]


def candidate_share(release: Release | None, stages: Iterable[Stage]) -> float:
    """The traffic share (%) the release's candidate carries now: its stage's, or 0."""
    if release is None or release.state != Release.State.ROLLING_OUT:
        return 0.0
    stage = carrying_traffic(stages)
    return float(stage.traffic_pct) if stage is not None else 0.0


def _deployment(backend: Backend, weight: int) -> Deployment:
    return Deployment(
        backend_id=backend.pk,
        api_base=api_root(backend.base_url) + "/v1",
        served_model=backend.model_name,
        api_key_env=backend.credential_env or None,
        weight=weight,
    )


def gateway(slugs: Iterable[str] | None = None) -> Gateway:
    """The routes of every live service (or of those named), in slug order.

    Only the columns a route needs, and plain rows rather than model instances where
    there are thousands: at 2,000 services building full Service, Revision and policy
    instances took most of a second (bench/gateway_render.py)."""
    services_read = Service.objects.filter(live_revision__isnull=False)
    if slugs is not None:
        services_read = services_read.filter(slug__in=list(slugs))
    services = list(
        services_read.order_by("slug").values_list(
            "pk", "slug", "live_revision_id", "live_revision__gateway_policy__document"
        )
    )
    # The later reads name the services by a subquery, not by thousands of ids as
    # parameters (psycopg spent a fifth of a second splitting such a query).
    rolling_read = Release.objects.filter(
        service__in=services_read.values("pk"), state=Release.State.ROLLING_OUT
    )
    rolling = {
        release.service_id: release
        for release in rolling_read.only("pk", "service_id", "to_revision_id", "state").order_by(
            "pk"
        )
    }
    stages: dict[int, list[Stage]] = defaultdict(list)
    for stage in (
        Stage.objects.filter(release__in=rolling_read.values("pk"))
        .only("pk", "release_id", "number", "traffic_pct", "state")
        .order_by("number")
    ):
        stages[stage.release_id].append(stage)
    backends: dict[int, list[Backend]] = defaultdict(list)
    for backend in (
        Backend.objects.filter(
            Q(revision__in=services_read.values("live_revision_id"))
            | Q(revision__in=rolling_read.values("to_revision_id")),
            routed=True,
        )
        .only("pk", "revision_id", "base_url", "model_name", "credential_env")
        .order_by("pk")
    ):
        backends[backend.revision_id].append(backend)

    routes, unrouted = [], []
    for service_id, slug, live_id, policy in services:
        release = rolling.get(service_id)
        candidate = release.to_revision_id if release else None
        share = candidate_share(release, stages[release.pk] if release else [])
        live_side = backends[live_id]
        candidate_side = backends[candidate] if candidate and candidate != live_id else []
        if not candidate_side:
            share = 0.0
        elif not live_side:
            share = 100.0
        if not live_side and not candidate_side:
            unrouted.append(slug)
            continue
        weights = split_weights(share, [b.pk for b in live_side], [b.pk for b in candidate_side])
        deployments = [_deployment(b, weights[b.pk]) for b in live_side + candidate_side]
        routes.append(ServiceRoute(slug, deployments, policy))
    return Gateway(routes=routes, unrouted=unrouted)


def service_config_yaml(
    slug: str, document: dict[str, Any] | None = None, *, draft: bool = False
) -> str | None:
    """The part of the rendered gateway config for one service, as the API serves it;
    with `draft`, as it would be with `document` as the policy in force. None when the
    gateway routes nothing to the service (not live, or no routed backend)."""
    routes = gateway([slug]).routes
    if not routes:
        return None
    route = routes[0]
    if draft:
        route = dataclasses.replace(route, policy=document)
    return route_text(route)


def whole_config_text(routes: Iterable[ServiceRoute]) -> str:
    """The whole proxy's config, as `render_gateway` writes it and `GET
    /api/gateway/litellm/` answers it: every route, and the proxy-wide settings."""
    metrics = GatewayMetrics(
        enabled=settings.GATEWAY_PROMETHEUS_METRICS,
        require_auth=settings.GATEWAY_METRICS_REQUIRE_AUTH,
    )
    return render_yaml(render_config(routes, metrics))


def route_text(route: ServiceRoute) -> str:
    """One service's config text, as `GET /api/services/{slug}/gateway/litellm/` answers
    it (a service's part does not depend on the others')."""
    return render_yaml(render_config([route]))


@dataclass(frozen=True)
class WeightInForce:
    deployment: str  # model_info.id, as the running gateway names it
    backend: str
    candidate: bool
    share_pct: float


@dataclass(frozen=True)
class ServiceGateway:
    """What the gateway should be doing for one service now (the incident screen's block)."""

    policy: GatewayPolicy | None
    limits: dict[str, Any]
    weights: list[WeightInForce]
    fallbacks: list[dict[str, str]]
    # Per task type the service serves: its rule of the policy, or None when not stated.
    degradation: list[tuple[str, dict[str, Any] | None]]
    routed: bool


def service_gateway(service: Service, task_types: Iterable[str]) -> ServiceGateway:
    """The block for `service` (its live revision and policy loaded), in the four queries
    of `gateway()` plus one for the backends' names."""
    live = service.live_revision
    policy = live.gateway_policy if live is not None else None
    document = (policy.document if policy is not None else None) or {}
    routes = gateway([service.slug]).routes if live is not None else []
    weights: list[WeightInForce] = []
    if routes and live is not None:
        deployments = routes[0].deployments
        total = sum(d.weight for d in deployments) or 1
        found = {
            pk: (name, revision_id)
            for pk, name, revision_id in Backend.objects.filter(
                pk__in=[d.backend_id for d in deployments]
            ).values_list("pk", "name", "revision_id")
        }
        weights = [
            WeightInForce(
                deployment=deployment_id(service.slug, d.backend_id),
                backend=found[d.backend_id][0],
                candidate=found[d.backend_id][1] != live.pk,
                share_pct=round(100 * d.weight / total, 1),
            )
            for d in deployments
            if d.weight > 0
        ]
    rules = document.get("degradation", {})
    return ServiceGateway(
        policy=policy,
        limits=document.get("limits", {}),
        weights=weights,
        fallbacks=document.get("fallbacks", []),
        degradation=[(task, rules.get(task)) for task in task_types],
        routed=bool(routes),
    )


# The action of the Event that records a service's rendered config after a change.
CONFIG_CHANGED = "gateway.config_changed"


def service_texts(found: Gateway) -> dict[str, str]:
    """Each routed service's own config text (`route_text`)."""
    return {route.slug: route_text(route) for route in found.routes}


def config_sha256s(slugs: Iterable[str]) -> dict[str, str | None]:
    """The sha256 of each named service's config text now (its `X-Config-SHA256`); None
    for a service the gateway has no route for (the endpoint answers 404)."""
    wanted = list(slugs)
    texts = service_texts(gateway(wanted))
    return {slug: litellm.config_sha256(texts[slug]) if slug in texts else None for slug in wanted}


def recorded_sha256s(service_ids: Iterable[int]) -> dict[int, str | None]:
    """The sha256 each service's last `gateway.config_changed` Event recorded (None: no
    route then, or none recorded yet). Two queries, however many services."""
    last = (
        Event.objects.filter(action=CONFIG_CHANGED, service_id__in=list(service_ids))
        .values("service_id")
        .annotate(sequence=Max("sequence"))
        .values_list("sequence", flat=True)
    )
    recorded: dict[int, str | None] = {}
    for event in Event.objects.filter(sequence__in=list(last)).only("service_id", "payload"):
        assert event.service_id is not None  # filtered above
        recorded[event.service_id] = event.payload_data.get("sha256")
    return recorded


@dataclass(frozen=True)
class PolicyPreview:
    """A draft policy document, judged before anything is recorded: the problems the
    verb would refuse it for, what it changes against the version in force, and the
    service's gateway config it would render (None when refused or routing nothing)."""

    document: dict[str, Any]
    problems: list[str]
    changes: list[Change]
    config: str | None


def policy_preview(
    service: Service, in_force: GatewayPolicy | None, document: dict[str, Any]
) -> PolicyPreview:
    problems = document_problems(service, document)
    return PolicyPreview(
        document=document,
        problems=problems,
        changes=policy_changes(in_force.document if in_force else None, document),
        # A document the verb would refuse is not rendered: the renderer trusts its input.
        config=None if problems else service_config_yaml(service.slug, document, draft=True),
    )


def service_names(service: Service) -> ServiceNames:
    """What the gateway's metrics are attributed to: the service's tenants and task types,
    and every backend of any of its revisions by the ``model_info.id`` the rendered config
    gives it (a day may span a release: yesterday's backends still name yesterday's
    traffic). Two queries."""
    tenants = frozenset(t for t in service.tenants or [] if isinstance(t, str))
    task_types = frozenset(service.task_types.values_list("slug", flat=True))
    backends = {
        deployment_id(service.slug, pk): name
        for pk, name in Backend.objects.filter(revision__service=service).values_list("pk", "name")
    }
    return ServiceNames(service.slug, tenants, task_types, backends)
