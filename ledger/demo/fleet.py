"""The fleet: N services with two dozen revisions each, for benchmarks (`seed_demo --scale N`)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable

from django.db import transaction
from django.utils import timezone

from ledger import services as verbs
from ledger.chain import NewEvent, append_events
from ledger.demo.registry import asset_fields, image_reference
from ledger.fingerprint import compute_fingerprint
from ledger.gateway_policy import document_sha256
from ledger.models import (
    Capability,
    GatewayPolicy,
    License,
    ModelAsset,
    Revision,
    Runtime,
    Service,
    Team,
)
from ledger.services import created_payload, live_revision_changed, snapshot
from lib.actors import Actor

FLEET_TEAM = "fleet"
FLEET_REVISIONS = 24
_FLEET_ENGINES = [
    ("vllm", "0.6.3", {"max_model_len": 32768, "enable_prefix_caching": True}),
    ("sglang", "0.4.1", {"context_length": 32768, "mem_fraction_static": 0.88}),
    ("tgi", "3.0.1", {"max_total_tokens": 32768, "max_input_tokens": 30720}),
    ("lmdeploy", "0.6.4", {"session_len": 32768, "backend": "turbomind"}),
]
_TIERS = ["production", "internal", "internal", "experimental"]
_EXPOSURES = ["internal", "customer_data", "internal", "external"]
_TASKS = [["chat"], ["chat", "rag"], ["sql"], ["summarization"], ["translation"], ["code-review"]]


def fleet_slug(index: int) -> str:
    return f"fleet-{index:04d}"


def _fleet_parts(actor: Actor) -> tuple[Team, list[ModelAsset], list[Runtime]]:
    """The fleet's team, eight assets and four runtimes (created once, through the verbs)."""
    team = Team.objects.filter(slug=FLEET_TEAM).first() or verbs.create_team(
        actor=actor, slug=FLEET_TEAM, name="Fleet (benchmark data)"
    )
    license_ = License.objects.filter(spdx_id="Apache-2.0").first() or verbs.create_license(
        actor=actor, spdx_id="Apache-2.0", name="Apache License 2.0"
    )
    assets = []
    for index in range(8):
        name = f"fleet-model-{index + 1}"
        asset = ModelAsset.objects.filter(name=name, revision="v1").first()
        if asset is None:
            fields = asset_fields(
                name,
                "v1",
                team=FLEET_TEAM,
                family="fleet",
                source=f"models.internal.example.com/fleet/{name}",
                license="Apache-2.0",
            )
            fields.update(team=team, license=license_)
            asset = verbs.register_asset(actor=actor, **fields)
        assets.append(asset)
    runtimes = []
    for engine, version, params in _FLEET_ENGINES:
        name = f"fleet-{engine}-{version.replace('.', '-')}"
        runtime = Runtime.objects.filter(name=name).first() or verbs.create_runtime(
            actor=actor,
            name=name,
            team=team,
            engine=engine,
            engine_version=version,
            image=image_reference(f"registry.example.com/inference/{engine}", version),
            launch_parameters=params,
            gpu_model="H100-80GB",
            gpu_count=1,
            gpu_memory_gb=80,
        )
        runtimes.append(runtime)
    return team, assets, runtimes


def _row_fields(model) -> list[str]:
    # The fields the domain verbs snapshot into a created row's event payload.
    return [
        f.name
        for f in model._meta.get_fields()
        if f.concrete and not f.auto_created and f.name not in {"created_at", "updated_at"}
    ]


def _seed_fleet_service(
    index: int, team: Team, assets: list[ModelAsset], runtimes: list[Runtime], actor: Actor
) -> None:
    """One fleet service with its history, in a dozen statements after the service.

    The service is created through its verb. Its 24 revisions, their 72
    capabilities and its 7 live-revision changes are written in bulk, with the
    values the verbs would write (generated, known valid) and the events they
    would append (`live_revision_changed` is the verb's own), appended with
    `append_events` in the same transaction in the order the verbs would have
    made them, so the chain is whole, verifies, and tells the serving history.
    Through the verbs, row by row, 2,000 services took most of an hour on a
    loaded machine: each takes its locks and appends its event alone.
    """
    service = verbs.create_service(
        actor=actor,
        slug=fleet_slug(index),
        name=f"Fleet service {index:04d}",
        team=team,
        tier=_TIERS[index % len(_TIERS)],
        exposure=_EXPOSURES[index % len(_EXPOSURES)],
        task_types=_TASKS[index % len(_TASKS)],
        tenants=[f"tenant-{index % 17}", f"tenant-{index % 5 + 20}"],
        slo_ttft_p95_ms=600 + 100 * (index % 10),
        slo_ttft_p99_ms=1500 + 100 * (index % 10),
        slo_tpot_ms=40 + index % 30,
        review_cadence_days=[30, 60, 90, 180][index % 4],
    )
    # Each revision names its own policy, by name only (as revisions did before
    # policies were versioned): unknown versions, one per revision.
    policies = GatewayPolicy.objects.bulk_create(
        GatewayPolicy(
            service=service,
            version=number,
            label=f"gw-{2024 + number // 12}.{number % 12 + 1:02d}",
            document=None,
            sha256=document_sha256(None),
            note="Named by a revision; its document is not recorded.",
        )
        for number in range(1, FLEET_REVISIONS + 1)
    )
    revisions = Revision.objects.bulk_create(
        Revision(
            service=service,
            number=number,
            model_asset=assets[(index + number) % len(assets)],
            runtime=runtimes[number % len(runtimes)],
            context_limit=32768,
            gateway_policy=policies[number - 1],
            fingerprint=compute_fingerprint(
                assets[(index + number) % len(assets)], runtimes[number % len(runtimes)], 32768
            ),
        )
        for number in range(1, FLEET_REVISIONS + 1)
    )
    # Each revision was built on the one before it (known once both have ids).
    for previous, revision in itertools.pairwise(revisions):
        revision.based_on = previous
    Revision.objects.bulk_update(revisions[1:], ["based_on"])
    capabilities = Capability.objects.bulk_create(
        Capability(revision=revision, kind=kind, value=value)
        for revision in revisions
        for kind, value in (
            ("context_length", 32768),
            ("max_concurrency", 32 * (1 + revision.number % 4)),
            ("streaming", "sse"),
        )
    )
    # Every third revision went live; the last three are candidates.
    served = [r for r in revisions if r.number % 3 == 0 and r.number <= FLEET_REVISIONS - 3]
    now = timezone.now()
    Revision.objects.filter(pk__in=[r.pk for r in served]).update(served_at=now)
    Service.objects.filter(pk=service.pk).update(live_revision=served[-1], updated_at=now)

    revision_fields = _row_fields(Revision)
    capability_fields = _row_fields(Capability)
    events: list[NewEvent] = [
        NewEvent(
            action="gateway_policy.created",
            subject=policy,
            payload=created_payload(policy),
        )
        for policy in policies
    ]
    live: int | None = None
    for n, revision in enumerate(revisions):
        events.append(
            NewEvent(
                action="revision.created",
                subject=revision,
                payload={
                    "after": snapshot(revision, revision_fields),
                    "fingerprint": revision.fingerprint,
                    "gateway_policy_version": revision.gateway_policy.label,
                },
            )
        )
        events.extend(
            NewEvent(
                action="capability.declared",
                subject=capability,
                payload={"after": snapshot(capability, capability_fields)},
            )
            for capability in capabilities[3 * n : 3 * n + 3]
        )
        if revision in served:
            events.append(live_revision_changed(service, live, revision, "fleet history"))
            live = revision.pk
    append_events(events, actor=actor)


def seed_fleet(
    count: int, *, actor: Actor = None, progress: Callable[[int, int, float], None] | None = None
) -> int:
    """Make sure fleet services 1..count exist, each with its history; return how many were created.

    One transaction per service, so an interrupted run keeps what it finished
    and a rerun carries on.
    """
    with transaction.atomic():
        team, assets, runtimes = _fleet_parts(actor)
    existing = set(Service.objects.filter(slug__startswith="fleet-").values_list("slug", flat=True))
    todo = [index for index in range(1, count + 1) if fleet_slug(index) not in existing]
    started = time.monotonic()
    every = max(1, len(todo) // 20)
    for done, index in enumerate(todo, start=1):
        with transaction.atomic():
            _seed_fleet_service(index, team, assets, runtimes, actor)
        if progress and (done % every == 0 or done == len(todo)):
            progress(done, len(todo), time.monotonic() - started)
    return len(todo)
