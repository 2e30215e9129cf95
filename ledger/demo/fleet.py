"""The fleet: N services with two dozen revisions each, for benchmarks (`seed_demo --scale N`)."""

from __future__ import annotations

import time
from collections.abc import Callable

from django.db import transaction

from ledger import services as verbs
from ledger.chain import append_event
from ledger.demo.registry import asset_fields, image_reference
from ledger.fingerprint import compute_fingerprint
from ledger.models import Capability, License, ModelAsset, Revision, Runtime, Service, Team
from ledger.services import snapshot
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
    """One fleet service with its history.

    The service and its live-revision changes go through the verbs. Its 24
    revisions and their capabilities are inserted directly — the verbs'
    per-row validation queries would make 2,000 services take a quarter of an
    hour — with the same values the verbs would write (generated, known
    valid) and the same events, appended through `append_event` in the same
    transaction, so the chain is whole and verifies.
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
    revision_fields = _row_fields(Revision)
    capability_fields = _row_fields(Capability)
    previous = None
    for number in range(1, FLEET_REVISIONS + 1):
        asset = assets[(index + number) % len(assets)]
        runtime = runtimes[number % len(runtimes)]
        revision = Revision(
            service=service,
            number=number,
            model_asset=asset,
            runtime=runtime,
            context_limit=32768,
            gateway_policy_version=f"gw-{2024 + number // 12}.{number % 12 + 1:02d}",
            based_on=previous,
            fingerprint=compute_fingerprint(asset, runtime, 32768),
        )
        revision.save(force_insert=True)
        append_event(
            actor=actor,
            action="revision.created",
            subject=revision,
            payload={
                "after": snapshot(revision, revision_fields),
                "fingerprint": revision.fingerprint,
            },
        )
        capabilities = Capability.objects.bulk_create(
            Capability(revision=revision, kind=kind, value=value)
            for kind, value in (
                ("context_length", 32768),
                ("max_concurrency", 32 * (1 + number % 4)),
                ("streaming", "sse"),
            )
        )
        for capability in capabilities:
            append_event(
                actor=actor,
                action="capability.declared",
                subject=capability,
                payload={"after": snapshot(capability, capability_fields)},
            )
        # Every third revision went live; the last three are candidates.
        if number % 3 == 0 and number <= FLEET_REVISIONS - 3:
            verbs.set_live_revision(service, revision, actor=actor, reason="fleet history")
        previous = revision


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
