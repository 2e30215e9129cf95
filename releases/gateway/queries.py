"""What the gateway should be doing now, read from the ledger: each live service's
backends, weighted by the rollout in force, and its gateway policy in force.

- The live revision's enabled backends carry the traffic; while a release rolls out,
  its candidate's enabled backends carry the share of the stage carrying traffic
  (`queries.rollout.carrying_traffic`: observing, held or breached — a hold or a
  breach keeps the share until a person or the analysis acts). A promotion changes
  the share at once; an abort or a rollback ends the rollout, and the candidate gets
  nothing.
- A side with no enabled backend cannot carry its share: a candidate with none gets
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

from ledger.models import GatewayPolicy, Service
from releases.gateway.litellm import (
    Deployment,
    ServiceRoute,
    deployment_id,
    render_config,
    render_yaml,
    split_weights,
)
from releases.governance.queries.rollout import carrying_traffic
from releases.models import Release, Stage
from replay.client import api_root
from replay.models import Backend


@dataclass(frozen=True)
class Gateway:
    routes: list[ServiceRoute]
    # Live services with no enabled backend: the gateway cannot send them anything.
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
    """The routes of every live service (or of those named), in slug order."""
    services_read = Service.objects.filter(live_revision__isnull=False).select_related(
        "live_revision__gateway_policy"
    )
    if slugs is not None:
        services_read = services_read.filter(slug__in=list(slugs))
    services = list(services_read.order_by("slug"))
    rolling = {
        release.service_id: release
        for release in Release.objects.filter(
            service__in=services, state=Release.State.ROLLING_OUT
        ).order_by("pk")
    }
    stages: dict[int, list[Stage]] = defaultdict(list)
    for stage in Stage.objects.filter(release__in=rolling.values()).order_by("number"):
        stages[stage.release_id].append(stage)
    revision_ids = {s.live_revision_id for s in services}
    revision_ids |= {r.to_revision_id for r in rolling.values()}
    backends: dict[int, list[Backend]] = defaultdict(list)
    for backend in Backend.objects.filter(revision_id__in=revision_ids, enabled=True).order_by(
        "pk"
    ):
        backends[backend.revision_id].append(backend)

    routes, unrouted = [], []
    for service in services:
        live = service.live_revision
        assert live is not None  # filtered above
        release = rolling.get(service.pk)
        candidate = release.to_revision_id if release else None
        share = candidate_share(release, stages[release.pk] if release else [])
        live_side = backends[live.pk]
        candidate_side = backends[candidate] if candidate and candidate != live.pk else []
        if not candidate_side:
            share = 0.0
        elif not live_side:
            share = 100.0
        if not live_side and not candidate_side:
            unrouted.append(service.slug)
            continue
        weights = split_weights(share, [b.pk for b in live_side], [b.pk for b in candidate_side])
        deployments = [_deployment(b, weights[b.pk]) for b in live_side + candidate_side]
        routes.append(ServiceRoute(service.slug, deployments, live.gateway_policy.document))
    return Gateway(routes=routes, unrouted=unrouted)


def service_config_yaml(
    slug: str, document: dict[str, Any] | None = None, *, draft: bool = False
) -> str | None:
    """The part of the rendered gateway config for one service, as the API serves it;
    with `draft`, as it would be with `document` as the policy in force. None when the
    gateway routes nothing to the service (not live, or no enabled backend)."""
    routes = gateway([slug]).routes
    if not routes:
        return None
    route = routes[0]
    if draft:
        route = dataclasses.replace(route, policy=document)
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
