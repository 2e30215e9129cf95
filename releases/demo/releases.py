"""Demo releases in every state, so `make run` shows the whole flow.

Through the verbs (every step an Event): a draft whose license gate fails, a
release awaiting sign-offs, an approved one, a rejected one, and an emergency
release rolling out with its sign-offs overdue. What the gates read is made the
way it arrives in production: load-test files through the importer, replay runs
through replay's own run machinery. The replays are recorded as a worker
records them (claim, one result per sample, finish with summary, baseline and
verdict), with answers that passed, because nothing listens on the demo
backends' address; where replay may not reach that address (outside
development) a waiver stands in, saying so. The demo's waivers are granted by
`admin`, who holds every role: whoever waives a gate does not sign the role that
owns it, and `sre`, `security` and `business` sign. They last as long as the
service's tier allows (`WAIVER_MAX_DAYS_<TIER>`). The model team signs through
`owner2`, a second model owner of each demo team beside the filer `owner`. (`admin`
is in the teams too, but an administrator without the model owner role signs as
an administrator, which separation of duties does not count as the role's.)

Idempotent: when the demo services already have releases, nothing is added.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.utils import timezone

from ledger import services as ledger_services
from ledger.demo.evidence import LOADTEST_DIR
from ledger.demo.registry import policy_label
from ledger.engines import Engine
from ledger.models import LoadTestReport, Revision, Service
from releases import policy
from releases.governance import gates as release_gates
from releases.governance import services
from releases.models import Release
from replay import outbound
from replay import services as replay_services
from replay.demo import DEMO_BACKEND_URL
from replay.models import Backend, Result, Run, SampleSet
from replay.services import runs as replay_runs

DEMO_SERVICES = ("doc-translate", "kb-assistant", "support-summarizer", "dataagent-sql")
REPLAY_SET = "starter-short-qa"
VERIFICATION_SET = "starter-refusal"
METRICS_ALL = [
    "ttft",
    "tpot",
    "tokens_per_s",
    "queue_length",
    "gpu_memory",
    "kv_cache_usage",
    "error_rate",
]
LOGGING = {"debug_logs": "sampled", "audit_logs": "on", "sensitive_retention_days": 30}
SHORT_FILE = "vllm_c2_n20_detailed.json"
BOTH_FILES = {"short": SHORT_FILE, "high_concurrency": "guidellm_rate_sweep.json"}


def _guards(ttft: int) -> dict[str, float]:
    return {"ttft_p95_ms": ttft, "error_rate_pct": 1, "structured_error_rate_pct": 2}


def _stages(ttft: int) -> list[dict[str, Any]]:
    return [
        {"traffic_pct": 10, "observation_minutes": 60, "guards": _guards(ttft)},
        {"traffic_pct": 50, "observation_minutes": 240, "guards": _guards(ttft)},
        {"traffic_pct": 100, "observation_minutes": 60, "guards": _guards(ttft)},
    ]


def _people() -> dict[str, Any]:
    return get_user_model().objects.in_bulk(
        ["owner", "owner2", "sre", "security", "business", "admin"], field_name="username"
    )


def _backend(revision: Revision, name: str) -> Backend | None:
    """A demo backend for `revision`, or None where replay may not reach the demo address."""
    found = Backend.objects.filter(name=name).first()
    if found is not None:
        return found
    if outbound.base_url_problem(DEMO_BACKEND_URL):
        return None
    return replay_services.create_backend(
        actor=None,
        name=name,
        revision=revision,
        base_url=DEMO_BACKEND_URL,
        model_name=revision.service.slug,
        engine=Engine.OPENAI_COMPATIBLE,
        concurrency_limit=4,
    )


def _recorded_replay(
    backend: Backend, set_name: str, *, trigger: str = Run.Trigger.MANUAL, ttft_ms: float = 180.0
) -> Run | None:
    """A replay of the newest version of `set_name`, recorded as a worker records it."""
    sample_set = SampleSet.objects.filter(name=set_name).order_by("-version").first()
    if sample_set is None:
        return None
    run = replay_services.start_run(
        actor=None, backend=backend, sample_set=sample_set, trigger=trigger, enqueue=False
    )
    return record_answers(run, ttft_ms=ttft_ms)


def record_answers(run: Run, *, ttft_ms: float = 180.0) -> Run:
    """Finish a queued run with answers that passed, as a worker records them (nothing
    listens on the demo backends' address)."""
    token = replay_runs._claim(run.pk)
    assert token is not None
    for sample in run.sample_set.samples.all():
        for attempt in range(1, sample.repeat + 1):
            Result.objects.create(
                run=run,
                sample=sample,
                attempt=attempt,
                outcome=Result.Outcome.PASSED if sample.rerunnable else Result.Outcome.SKIPPED,
                mode=Result.Mode.RERUN if sample.rerunnable else Result.Mode.SKIPPED,
                ttft_ms=ttft_ms,
                tpot_ms=22.0,
                e2e_ms=ttft_ms + 900.0,
                output_tokens=48,
                finish_reason="stop",
                output="(demo answer)",
                output_length=13,
            )
    return replay_runs._finish(run, token)


# The demo ships real files of a small model (gemma-3-270m on llama.cpp), not of the
# demo services' models: they are attached as what they are, mismatched evidence.
DEMO_MISMATCH_REASON = (
    "demo data: a real file of gemma-3-270m on llama.cpp stands in for a measurement "
    "of this revision"
)


def _evidence(revision: Revision, workloads: dict[str, str]) -> None:
    from ledger.services import import_loadtest_report

    for workload, filename in workloads.items():
        if LoadTestReport.objects.filter(revision=revision, workload=workload).exists():
            continue
        with (Path(LOADTEST_DIR) / filename).open("rb") as raw:
            import_loadtest_report(
                revision,
                actor=None,
                workload=workload,
                file=raw,
                filename=filename,
                accept_mismatch=DEMO_MISMATCH_REASON,
            )


def _replays(service: Service, candidate: Revision, people: dict[str, Any]) -> bool:
    """Live then candidate replays of the demo set, and a verification of the live one.
    False when replay may not reach the demo backends here."""
    live = service.live_revision
    assert live is not None
    live_backend = _backend(live, f"{service.slug}-live")
    canary = _backend(candidate, f"{service.slug}-r{candidate.number}-canary")
    if live_backend is None or canary is None:
        return False
    _recorded_replay(live_backend, REPLAY_SET)
    _recorded_replay(canary, REPLAY_SET)
    _recorded_replay(live_backend, VERIFICATION_SET, trigger=Run.Trigger.VERIFICATION)
    return True


def _form(service: Service, ttft: int, *, tier_metrics: list[str]) -> dict[str, Any]:
    return {
        "impact_tenants": list(service.tenants or []),
        "impact_task_types": list(service.task_types.values_list("slug", flat=True)),
        "impact_downstream": ["agent_runtime", "trace", "eval"],
        "required_sample_sets": [REPLAY_SET],
        "known_limitations": "Answers in English only; long tables are truncated at 8k tokens.",
        "compatible_request_formats": "OpenAI chat completions; streaming SSE; no tool calls.",
        "metrics_declared": tier_metrics,
        "gray_stages": _stages(ttft),
        "rollback_kind": Release.RollbackKind.MODEL,
        "rollback_triggers": [
            f"p95 TTFT above {ttft} ms for 10 minutes",
            "error rate above 1 % for 5 minutes",
        ],
        "rollback_expected_minutes": 8,
        "rollback_impact_scope": "every tenant of the service, for the minutes it takes",
        "rollback_verification_set": VERIFICATION_SET,
        "logging_policy": dict(LOGGING),
        "retirement_plan": "Retire when a successor passes replay on this service's sets; "
        "tenants get 30 days' notice on the service page; their traffic moves to the successor.",
    }


def _demo_waiver_expiry(release: Release) -> dt.datetime:
    """As late as the service's tier lets a waiver last."""
    return policy.waiver_bound(release.service.tier, timezone.now())


def _waive_if_unreachable(release: Release, reached: bool, people: dict[str, Any]) -> None:
    if reached:
        return
    for gate in ("replay", "rollback_plan"):
        services.grant_waiver(
            release,
            actor=people["admin"],
            gate=gate,
            reason="Demo data: replay may not reach the demo backends on this machine.",
            expires_at=_demo_waiver_expiry(release),
        )


def _submitted(
    service: Service,
    candidate: Revision,
    people: dict[str, Any],
    *,
    evidence: dict[str, str],
    change_kind: str,
    summary: str,
    ttft: int,
    metrics: list[str],
) -> Release:
    """A release of `candidate` filed and submitted once its load-test files are attached
    and its replays recorded; what the demo cannot show is waived, saying so."""
    _evidence(candidate, evidence)
    reached = _replays(service, candidate, people)
    release = services.create_release(
        actor=people["owner"],
        service=service,
        to_revision=candidate,
        change_kind=change_kind,
        summary=summary,
        **_form(service, ttft, tier_metrics=metrics),
    )
    _waive_if_unreachable(release, reached, people)
    _submit_or_waive(release, people["owner"], people["admin"])
    return release


def seed_releases() -> int:
    """Add the demo releases; returns how many were made (0 when they exist)."""
    if Release.objects.filter(service__slug__in=DEMO_SERVICES).exists():
        return 0
    services_by_slug = {
        s.slug: s
        for s in Service.objects.filter(slug__in=DEMO_SERVICES).select_related(
            "live_revision", "team"
        )
    }
    if len(services_by_slug) != len(DEMO_SERVICES):
        return 0
    people = _people()
    owner, owner2, sre, security = (
        people["owner"],
        people["owner2"],
        people["sre"],
        people["security"],
    )
    made = 0

    # 1. A draft with a failing gate: Gemma 2's terms are not accepted, its license pending.
    doc = services_by_slug["doc-translate"]
    gemma = Revision.objects.get(service=doc, number=2)
    services.create_release(
        actor=owner,
        service=doc,
        to_revision=gemma,
        change_kind=Release.ChangeKind.MODEL_UPGRADE,
        summary="Gemma 2 9B for documentation translation: better German and Japanese.",
        **_form(doc, 1500, tier_metrics=["ttft", "tpot", "error_rate"]),
    )
    made += 1

    # 2. Awaiting sign-offs: kb-assistant's vLLM 0.7.3 engine upgrade, model team signed.
    kb = services_by_slug["kb-assistant"]
    waiting = _submitted(
        kb,
        Revision.objects.get(service=kb, number=4),
        people,
        evidence=BOTH_FILES,
        change_kind=Release.ChangeKind.ENGINE_UPGRADE,
        summary="vLLM 0.6.3 to 0.7.3 with chunked prefill: lower p99 TTFT under long prompts.",
        ttft=800,
        metrics=METRICS_ALL,
    )
    services.sign_off(
        waiting, actor=owner2, role="model_team", decision="approve", comment="Replay is clean."
    )
    made += 1

    # 3. Approved: support-summarizer raises max_num_seqs on its live runtime (internal tier).
    summ = services_by_slug["support-summarizer"]
    live = summ.live_revision
    assert live is not None
    wider = ledger_services.new_revision_from(
        live,
        actor=None,
        gateway_policy_version=policy_label("support-summarizer", "gw-2026.02"),
        notes="Gateway policy 2026.02: a larger per-tenant queue for the support shift change.",
    )
    approved = _submitted(
        summ,
        wider,
        people,
        evidence={"short": SHORT_FILE},
        change_kind=Release.ChangeKind.ROUTING,
        summary="Gateway policy 2026.02: a larger per-tenant queue at shift change.",
        ttft=2000,
        metrics=["ttft", "tpot", "error_rate"],
    )
    services.sign_off(approved, actor=owner2, role="model_team", decision="approve")
    services.sign_off(
        approved, actor=sre, role="platform", decision="approve", comment="Rollback path checked."
    )
    made += 1

    # 4. Rejected: dataagent-sql's INT4 AWQ quantization switch, by security & compliance.
    data = services_by_slug["dataagent-sql"]
    rejected = _submitted(
        data,
        Revision.objects.get(service=data, number=2),
        people,
        evidence=BOTH_FILES,
        change_kind=Release.ChangeKind.QUANTIZATION_SWITCH,
        summary="INT4 AWQ on one H100 instead of two BF16 GPUs.",
        ttft=1200,
        metrics=METRICS_ALL,
    )
    services.sign_off(rejected, actor=owner2, role="model_team", decision="approve")
    services.sign_off(
        rejected,
        actor=security,
        role="security_compliance",
        decision="reject",
        comment="Audit logs must keep SQL prompts 90 days for finance; this plan says 30.",
    )
    made += 1

    # 5. Emergency, rolling out with its sign-offs overdue: the same AWQ revision, after the
    #    BF16 pair lost a GPU; begun at night and recorded 30 hours ago.
    emergency = services.reopen_release(rejected, actor=owner)
    services.update_release(
        emergency,
        actor=owner,
        path=Release.Path.EMERGENCY,
        emergency_reason="One of the two H100s of the BF16 pool failed; AWQ fits on the one left.",
        logging_policy={**LOGGING, "sensitive_retention_days": 90},
        summary="Emergency: INT4 AWQ on the one healthy H100 while the other is replaced.",
    )
    _submit_or_waive(emergency, owner, people["admin"])
    services.start_rollout(
        emergency, actor=owner, started_at=timezone.now() - dt.timedelta(hours=30)
    )
    made += 1
    return made


# Why the demo waives a gate it cannot pass, by gate (else the load-test files' reason).
_DEMO_WAIVER_WHY = {
    "impact_assessed": "the starter sample sets are tagged by kind of question (factual, "
    "reasoning), not by the task types the demo services serve",
    "metrics_coverage": "the demo backends are not inference engines, so no probe can see "
    "their series on a /metrics endpoint",
}


def _submit_or_waive(release: Release, owner: Any, admin: Any) -> None:
    """Submit, the downstream systems the diff suggests ticked as the filer would; what
    the demo's data cannot show is waived by the demo's administrator, saying so (see
    the module's docstring)."""
    suggested = release_gates.load_inputs(release).impact_suggested
    ticked = list(dict.fromkeys([*release.impact_downstream, *suggested]))
    services.update_release(release, actor=owner, impact_downstream=ticked)
    try:
        services.submit_release(release, actor=owner)
    except services.GatesNotPassed as refused:
        for gate in refused.gates:
            why = _DEMO_WAIVER_WHY.get(
                gate["key"], "only two sample load-test files ship with the demo"
            )
            services.grant_waiver(
                release,
                actor=admin,
                gate=gate["key"],
                reason=f"Demo data: {why} ({gate['reason']})",
                expires_at=_demo_waiver_expiry(release),
            )
        services.submit_release(release, actor=owner)
