"""Release test setup: a production service with a live revision and a candidate that
passes every gate, built through the ledger's and the releases' verbs; evidence and
replay runs are rows as their importers and workers leave them."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.utils import timezone

from ledger import services as ledger_services
from ledger.models import LoadTestReport, PriceSheet, Revision, Service, TaskType
from ledger.services.gateway_policies import create_gateway_policy
from releases.governance import services
from releases.models import Release
from replay.models import Backend, Run, SampleSet
from tests.ledger.factories import RevisionFactory, RuntimeFactory, ServiceFactory, digest
from tests.replay.factories import BackendFactory, SampleSetFactory

GOOD_STAGES = [
    {
        "traffic_pct": 5,
        "observation_minutes": 60,
        "guards": {"ttft_p95_ms": 900, "error_rate_pct": 1, "structured_error_rate_pct": 2},
    },
    {
        "traffic_pct": 25,
        "observation_minutes": 120,
        "guards": {"ttft_p95_ms": 900, "error_rate_pct": 1, "structured_error_rate_pct": 2},
    },
    {"traffic_pct": 100, "observation_minutes": 60, "guards": {}},
]
ALL_METRICS = [
    "ttft",
    "tpot",
    "tokens_per_s",
    "queue_length",
    "gpu_memory",
    "kv_cache_usage",
    "error_rate",
]
# Every metric but the error rate: a production release's metrics_coverage gate fails, so
# it takes a waiver (a waiver is for a gate that does not pass).
UNDECLARED = ALL_METRICS[:-1]
LOGGING = {"debug_logs": "off", "audit_logs": "on", "sensitive_retention_days": 30}


def report(revision: Revision, workload: str, **columns: Any) -> LoadTestReport:
    """A parsed load-test report of `revision` as the importer leaves it (columns only)."""
    values = {
        "ttft_p95_ms": 500.0,
        "ttft_p99_ms": 900.0,
        "tpot_p95_ms": 20.0,
        "error_rate": 0.001,
        "requests": 1000,
        "measured_at": timezone.now(),
        "gpu_memory_peak_gib": 61.5,
        "kv_cache_peak_pct": 78.0,
        **columns,
    }
    runtime = revision.runtime
    seed = f"{revision.pk}:{workload}:{LoadTestReport.objects.count()}"
    return LoadTestReport.objects.create(
        revision=revision,
        workload=workload,
        tool="guidellm",
        format="guidellm",
        variant="benchmarks",
        source=LoadTestReport.Source.TOOL,
        raw_file=f"loadtest/{revision.pk}/{seed}/report.json",
        raw_sha256=digest(seed).removeprefix("sha256:"),
        raw_size=100,
        filename="report.json",
        fingerprint=revision.fingerprint,
        hardware={"gpu_model": runtime.gpu_model, "gpu_count": runtime.gpu_count},
        results={"levels": []},
        **values,
    )


def replay_run(
    sample_set: SampleSet,
    backend: Backend,
    *,
    verdict: str = Run.Verdict.PASSED,
    baseline: Run | None = None,
    trigger: str = Run.Trigger.MANUAL,
    below_budget: list[str] | None = None,
    finished_at: dt.datetime | None = None,
    reasons: list[str] | None = None,
) -> Run:
    """A finished replay run as the worker leaves it."""
    finished = finished_at or timezone.now()
    return Run.objects.create(
        sample_set=sample_set,
        backend=backend,
        revision=backend.revision,
        fingerprint=backend.revision.fingerprint,
        trigger=trigger,
        state=Run.State.FINISHED,
        verdict=verdict,
        started_at=finished - dt.timedelta(minutes=5),
        finished_at=finished,
        baseline=baseline,
        summary={
            "pass_rate": 1.0 if not below_budget else 0.9,
            "samples_below_budget": below_budget or [],
            "verdict_reasons": reasons or [],
        },
    )


def priced(gpu_model: str = "H100-80GB", *, days_ago: int = 30) -> PriceSheet:
    """A price sheet for `gpu_model` in force today (the one there is, if any): what the
    cost_record gate of internal and production releases asks for."""
    found = PriceSheet.objects.in_force(gpu_model, timezone.now().date())
    if found is not None:
        return found
    return ledger_services.record_price_sheet(
        actor=None,
        gpu_model=gpu_model,
        price_per_gpu_hour=Decimal("2.4500"),
        currency="USD",
        effective_from=timezone.now().date() - dt.timedelta(days=days_ago),
        note="List price of the test cloud.",
    )


@dataclass
class World:
    service: Service
    live: Revision
    candidate: Revision
    sample_set: SampleSet
    verification_set: SampleSet
    live_backend: Backend
    candidate_backend: Backend
    live_run: Run
    candidate_run: Run
    verification: Run
    reports: dict[str, LoadTestReport]


def complete_policy(service: Service, **sections: Any) -> dict[str, Any]:
    """A gateway policy document with everything a production gate asks of `service`:
    every limit, every tenant with rpm and tpm, a degradation entry per task type it
    serves (stopping, which every task type may), egress stated. `sections` replace
    whole sections."""
    document: dict[str, Any] = {
        "limits": {
            "max_input_tokens": 8192,
            "max_output_tokens": 1024,
            "timeout_s": 60,
            "stream_timeout_s": 30,
            "max_parallel_requests": 64,
        },
        "tenants": [{"name": name, "rpm": 600, "tpm": 200000} for name in service.tenants],
        "degradation": {
            task: {"action": "stop", "message": "The assistant is busy; try again shortly."}
            for task in service.task_types.values_list("slug", flat=True)
        },
        "retries": {"num_retries": 2, "allowed_fails": 3, "cooldown_s": 30},
        "egress": {"external_fallback_allowed": False},
    }
    document.update(sections)
    return document


ENGINE_SERIES = ["vllm:time_to_first_token_seconds", "vllm:num_requests_waiting"]
ALL_COVERED = ["ttft", "tpot", "tokens_per_s", "queue_length", "kv_cache_usage", "error_rate"]


def metrics_seen(revision: Revision, covers: list[str] | None = None) -> None:
    """`revision` declares its engine's series, and a probe found them, backing `covers`
    of the seven metrics (all but GPU memory, which is DCGM's, by default)."""
    capability = ledger_services.declare_capability(
        revision, actor=None, kind="metrics", value=list(ENGINE_SERIES)
    )
    ledger_services.record_capability_check(
        capability,
        actor=None,
        passed=True,
        evidence={
            "probe": "GET /metrics",
            "found": list(ENGINE_SERIES),
            "missing": [],
            "covers": list(ALL_COVERED if covers is None else covers),
        },
    )


def build_world(
    team,
    *,
    tier: str = "production",
    slug: str = "kb-assistant",
    sample_candidate: bool = False,
    task_types: tuple[str, ...] = (),
) -> World:
    """`sample_candidate`: the candidate serves what the shared sample load-test files
    measured (gemma-3-270m on llama.cpp), so a browser upload of one is its evidence.
    `task_types`: what the service serves (its gateway policy then degrades each)."""
    service = ServiceFactory(
        slug=slug,
        team=team,
        tier=tier,
        tenants=["support", "sales"],
        slo_ttft_p95_ms=800,
        slo_ttft_p99_ms=1500,
        slo_tpot_ms=30,
        slo_error_rate_pct=Decimal("1.00"),
    )
    if task_types:
        service.task_types.set(
            [TaskType.objects.get_or_create(slug=t, defaults={"name": t})[0] for t in task_types]
        )
    runtime = RuntimeFactory(team=team, gpu_model="H100-80GB", gpu_count=1)
    priced(runtime.gpu_model)
    gateway_policy = create_gateway_policy(
        service, actor=None, document=complete_policy(service), note="What every tier needs."
    )
    live = RevisionFactory(
        service=service, runtime=runtime, gateway_policy_version=gateway_policy.label
    )
    ledger_services.set_live_revision(service, live, actor=None)
    ledger_services.set_license_approval(live.model_asset, actor=None, approval="approved")
    if sample_candidate:
        from tests.ledger.evidence.conftest import sample_asset, sample_runtime

        candidate = RevisionFactory(
            service=service,
            runtime=sample_runtime(team, gpu_count=1, launch_parameters={"n_ctx": 32768}),
            model_asset=sample_asset(team),
            gateway_policy_version=gateway_policy.label,
        )
    else:
        candidate = RevisionFactory(
            service=service, runtime=runtime, gateway_policy_version=gateway_policy.label
        )
    ledger_services.set_license_approval(candidate.model_asset, actor=None, approval="approved")
    metrics_seen(candidate)
    service.refresh_from_db()
    candidate.refresh_from_db()
    live.refresh_from_db()
    sample_set = SampleSetFactory(name=f"{slug}-golden")
    verification_set = SampleSetFactory(name=f"{slug}-rollback")
    live_backend = BackendFactory(name=f"{slug}-live", revision=live)
    candidate_backend = BackendFactory(name=f"{slug}-canary", revision=candidate)
    live_run = replay_run(sample_set, live_backend)
    candidate_run = replay_run(sample_set, candidate_backend, baseline=live_run)
    verification = replay_run(verification_set, live_backend, trigger=Run.Trigger.VERIFICATION)
    reports = {
        w: report(candidate, w) for w in ("short", "high_concurrency", "long_context", "streaming")
    }
    return World(
        service=service,
        live=live,
        candidate=candidate,
        sample_set=sample_set,
        verification_set=verification_set,
        live_backend=live_backend,
        candidate_backend=candidate_backend,
        live_run=live_run,
        candidate_run=candidate_run,
        verification=verification,
        reports=reports,
    )


def complete_form(world: World) -> dict[str, Any]:
    """Every field a production release needs to pass its gates."""
    return {
        "risk": "",
        "impact_tenants": ["support"],
        "impact_task_types": [],
        "impact_downstream": ["front_end", "agent_runtime", "eval", "trace"],
        "required_sample_sets": [world.sample_set.name],
        "metrics_declared": list(ALL_METRICS),
        "gray_stages": [dict(s) for s in GOOD_STAGES],
        "rollback_kind": Release.RollbackKind.MODEL,
        "rollback_triggers": ["p95 TTFT above 1200 ms for 10 min"],
        "rollback_expected_minutes": 10,
        "rollback_impact_scope": "all tenants of the service for about ten minutes",
        "rollback_verification_set": world.verification_set.name,
        "logging_policy": dict(LOGGING),
        "retirement_plan": "Retire when the next fine-tune passes replay; 30 days' notice.",
    }


def file_release(world: World, owner, **fields: Any) -> Release:
    values = {**complete_form(world), **fields}
    return services.create_release(
        actor=owner,
        service=world.service,
        to_revision=world.candidate,
        change_kind=values.pop("change_kind", Release.ChangeKind.MODEL_UPGRADE),
        summary=values.pop("summary", "Qwen2.5 7B to the new fine-tune"),
        **values,
    )


def approve(release: Release, owner, signers: dict[str, Any]) -> Release:
    """Submit, then every required role approves."""
    services.submit_release(release, actor=owner)
    release.refresh_from_db()
    for role, signer in signers.items():
        if release.state != Release.State.SUBMITTED:
            break
        services.sign_off(release, actor=signer, role=role, decision="approve")
        release.refresh_from_db()
    return release


def roll_out(release: Release, owner, signers: dict[str, Any]) -> Release:
    """Approved, and its rollout started at stage 1."""
    approve(release, owner, signers)
    services.start_rollout(release, actor=owner)
    release.refresh_from_db()
    return release


def observe(release: Release, actor, candidate: dict[str, Any], **fields: Any):
    """Post an observation of the last ten minutes of the stage carrying traffic."""
    end = timezone.now()
    return services.record_observation(
        release,
        actor=actor,
        window_start=end - dt.timedelta(minutes=10),
        window_end=end,
        candidate=candidate,
        **fields,
    )
