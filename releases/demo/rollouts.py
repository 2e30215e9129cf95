"""Demo rollouts and rollbacks, so `make run` shows every variant of the incident screen.

After `releases.demo` (a draft, a release awaiting sign-offs, an approved one, a
rejected one and an emergency one rolling out), through the verbs:

- **code-review-bot**: a rollout whose critical guard breached at stage 1 (roll back
  first);
- **dataagent-sql**: the emergency rollout sends 10 % at stage 1 (set by
  `releases.demo`);
- **kb-assistant**: released to a new gateway policy, then rolled back (timed and
  confirmed by the SRE, since replay cannot reach the demo backends to verify it);
- **support-faq**, a small service added here: released from r1 to r2 and stable, its
  target verified today;
- **support-summarizer**: stable, but the target's last verification ran 31 days ago;
- **doc-translate**: never released (its live revision was registered, not released).

Each step is recorded as it happens: the chain's times are the seeding's. Idempotent:
nothing is added when the demo rollouts exist.
"""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

from django.utils import timezone

from ledger import services as ledger_services
from ledger.demo.registry import demo_policy
from ledger.demo.run_evidence import seed_run_evidence
from ledger.models import Revision, Service, TaskType
from ledger.services.gateway_policies import create_gateway_policy
from releases.cost.services import deferred_cost
from releases.demo.releases import (
    METRICS_ALL,
    VERIFICATION_SET,
    _backend,
    _evidence,
    _form,
    _people,
    _recorded_replay,
    _submit_or_waive,
    record_answers,
)
from releases.governance import services
from releases.governance.services import rollbacks
from releases.models import Release
from replay.models import Run

GOOD = {
    "requests": 1800,
    "ttft_p95_ms": 610,
    "error_rate_pct": 0.2,
    "structured_error_rate_pct": 0.4,
}


def _observe(release: Release, candidate: dict[str, Any], baseline: dict[str, Any]) -> None:
    end = timezone.now()
    services.record_observation(
        release,
        actor=None,
        window_start=end - dt.timedelta(minutes=15),
        window_end=end,
        candidate=candidate,
        baseline=baseline,
        source="gateway (demo)",
    )


def _sign_all(release: Release, people: dict[str, Any]) -> None:
    release.refresh_from_db()
    signers = {
        "model_team": people["owner2"],
        "platform": people["sre"],
        "security_compliance": people["security"],
        "business_owner": people["business"],
    }
    for role in list(signers):
        release.refresh_from_db()
        if release.state != Release.State.SUBMITTED:
            return
        from releases import policy

        if role in policy.required_signoffs(
            release.service.tier,
            release.path,
            risk_accepted=policy.accepts_risk(release.failure_classifications),
        ):
            services.sign_off(release, actor=signers[role], role=role, decision="approve")


# The demo is recorded in one sitting: its releases go on the emergency path, the one
# that may promote before a stage's observation window ends, and say so.
DEMO_EMERGENCY = {
    "path": Release.Path.EMERGENCY,
    "emergency_reason": "Demo data: recorded in one sitting, so the stages did not wait for "
    "their observation windows.",
}


def _release_fully(release: Release, people: dict[str, Any]) -> None:
    """Roll out, then promote every stage after good numbers."""
    services.start_rollout(release, actor=people["sre"])
    while True:
        release.refresh_from_db()
        if release.state != Release.State.ROLLING_OUT:
            break
        _observe(release, GOOD, {**GOOD, "ttft_p95_ms": 600})
        services.promote_release(release, actor=people["sre"])


def _breached(people: dict[str, Any]) -> None:
    bot = Service.objects.get(slug="code-review-bot")
    candidate = Revision.objects.get(service=bot, number=2)
    form = _form(bot, 3000, tier_metrics=["ttft", "error_rate"])
    form["gray_stages"] = [
        {
            "traffic_pct": 10,
            "observation_minutes": 120,
            "guards": {
                "ttft_p95_ms": {"max": 3000, "max_increase_pct": 50, "critical": True},
                "error_rate_pct": 2,
            },
        },
        {"traffic_pct": 100, "observation_minutes": 60},
    ]
    release = services.create_release(
        actor=people["owner"],
        service=bot,
        to_revision=candidate,
        change_kind=Release.ChangeKind.ENGINE_UPGRADE,
        summary="llama.cpp on an L4 instead of Ollama on a workstation: a pinned image, 16k context.",
        **form,
    )
    _submit_or_waive(release, people["owner"], people["admin"])
    services.start_rollout(release, actor=people["owner"])
    _observe(
        release,
        {"requests": 240, "ttft_p95_ms": 4100, "error_rate_pct": 0.8},
        {"requests": 2100, "ttft_p95_ms": 1900, "error_rate_pct": 0.5},
    )


def _rolled_back(people: dict[str, Any]) -> None:
    kb = Service.objects.select_related("live_revision").get(slug="kb-assistant")
    live = kb.live_revision
    assert live is not None
    stricter = copy.deepcopy(live.gateway_policy.document)
    for tenant in stricter["tenants"]:
        if tenant["name"] == "sales":
            tenant.update(rpm=60, tpm=20000)
    version = create_gateway_policy(
        kb,
        actor=None,
        document=stricter,
        note="Policy 2026.03: stricter per-tenant rate limits for the sales tenant.",
    )
    policy = ledger_services.new_revision_from(
        live,
        actor=None,
        gateway_policy_version=version.label,
        notes="Gateway policy 2026.03: stricter per-tenant rate limits.",
    )
    _evidence(
        policy,
        {"short": "vllm_c2_n20_detailed.json", "high_concurrency": "guidellm_rate_sweep.json"},
    )
    backend = _backend(policy, f"kb-assistant-r{policy.number}-canary")
    if backend is not None:
        _recorded_replay(backend, "starter-short-qa")
    release = services.create_release(
        actor=people["owner"],
        service=kb,
        to_revision=policy,
        change_kind=Release.ChangeKind.ROUTING,
        summary="Gateway policy 2026.03: stricter per-tenant rate limits for the sales tenant.",
        **_form(kb, 800, tier_metrics=METRICS_ALL),
        **DEMO_EMERGENCY,
    )
    _submit_or_waive(release, people["owner"], people["admin"])
    _sign_all(release, people)
    _release_fully(release, people)
    rollback = services.record_rollback(
        kb,
        actor=people["sre"],
        reason="Sales agents hit 429s at the quarter's last day: the new limits were too strict.",
        symptom="queue_congestion",
    )
    if rollback.verification_run is not None:
        record_answers(rollback.verification_run)
        rollbacks.conclude_verification(rollback)
    else:
        services.confirm_rollback(
            rollback,
            actor=people["sre"],
            succeeded=True,
            note="429s back to 0.1 % on the gateway dashboard within 6 minutes.",
        )
    services.close_release(
        release,
        actor=people["sre"],
        close_code=Release.CloseCode.ROLLED_BACK,
        note="Rolled back after sales hit rate limits.",
        incidents=[{"ticket": "INC-2041", "url": "https://tickets.example.com/INC-2041"}],
    )


def _stable_service(people: dict[str, Any]) -> None:
    """A small internal service released through the ledger, its target verified today."""
    summarizer = Service.objects.select_related("team").get(slug="support-summarizer")
    first = Revision.objects.get(service=summarizer, number=1)
    second = Revision.objects.get(service=summarizer, number=2)
    faq = ledger_services.create_service(
        actor=None,
        slug="support-faq",
        name="Support FAQ answers",
        description="Answers frequent customer questions inside the support widget.",
        team=summarizer.team,
        tier=Service.Tier.INTERNAL,
        exposure=summarizer.exposure,
        tenants=["support"],
        slo_ttft_p95_ms=2000,
        slo_tpot_ms=80,
        task_types=list(TaskType.objects.filter(slug="chat")),
    )
    faq_policy = create_gateway_policy(
        faq,
        actor=None,
        document=demo_policy(
            faq.slug,
            faq.tenants,
            list(faq.task_types.values_list("slug", flat=True)),
            tier=faq.tier,
        ),
        note="What the support widget's FAQ answers may use.",
    )
    r1, r2 = live_and_candidate(
        faq,
        faq_policy.label,
        first,
        second,
        notes=(
            "First revision: the summarizer's model answering FAQs.",
            "The summarizer's newer model.",
        ),
    )
    faq.refresh_from_db()
    live_backend = _backend(r1, "support-faq-live")
    canary = _backend(r2, "support-faq-r2-canary")
    if live_backend is not None and canary is not None:
        _recorded_replay(live_backend, "starter-short-qa")
        _recorded_replay(canary, "starter-short-qa")
    release = services.create_release(
        actor=people["owner"],
        service=faq,
        to_revision=r2,
        change_kind=Release.ChangeKind.MODEL_UPGRADE,
        summary="The summarizer's newer model for FAQ answers.",
        **_form(faq, 2000, tier_metrics=["ttft", "tpot", "error_rate"]),
        **DEMO_EMERGENCY,
    )
    if live_backend is not None:
        _recorded_replay(live_backend, VERIFICATION_SET, trigger=Run.Trigger.VERIFICATION)
    _submit_or_waive(release, people["owner"], people["admin"])
    _sign_all(release, people)
    _release_fully(release, people)


def live_and_candidate(
    service: Service,
    policy_label: str,
    first: Revision,
    second: Revision,
    *,
    notes: tuple[str, str],
) -> tuple[Revision, Revision]:
    """A new demo service's r1 (the parts of `first`, set live) and r2 (the parts of
    `second`), both running `policy_label`, each with the demo's short load test."""
    r1 = ledger_services.create_revision(
        service,
        actor=None,
        model_asset=first.model_asset,
        runtime=first.runtime,
        context_limit=first.context_limit,
        gateway_policy_version=policy_label,
        notes=notes[0],
    )
    ledger_services.set_live_revision(service, r1, actor=None, reason="registered what runs")
    r2 = ledger_services.new_revision_from(
        r1,
        actor=None,
        model_asset=second.model_asset,
        runtime=second.runtime,
        context_limit=second.context_limit,
        gateway_policy_version=policy_label,
        notes=notes[1],
    )
    for revision in (r1, r2):
        _evidence(revision, {"short": "vllm_c2_n20_detailed.json"})
    return r1, r2


def _stale_target() -> None:
    """support-summarizer's target (r1) was last verified 31 days ago."""
    summarizer = Service.objects.get(slug="support-summarizer")
    first = Revision.objects.get(service=summarizer, number=1)
    backend = _backend(first, "support-summarizer-r1-standby")
    if backend is None:
        return
    run = _recorded_replay(backend, VERIFICATION_SET, trigger=Run.Trigger.VERIFICATION)
    if run is not None:
        # Demo data: the run as a worker left it a month ago.
        month_ago = timezone.now() - dt.timedelta(days=31)
        Run.objects.filter(pk=run.pk).update(
            started_at=month_ago - dt.timedelta(minutes=4), finished_at=month_ago
        )


def seed_rollouts() -> int:
    """Add the demo rollouts and rollbacks; returns how many variants were made."""
    if Service.objects.filter(slug="support-faq").exists():
        return 0
    if Service.objects.filter(slug__in=["code-review-bot", "kb-assistant"]).count() != 2:
        return 0
    people = _people()
    _breached(people)
    _rolled_back(people)
    _stable_service(people)
    _stale_target()
    with deferred_cost():  # its 60 days' cost stored once
        seed_run_evidence(["support-faq"])
    from releases.governance.services.readiness import refresh_readiness

    for pk in Service.objects.values_list("pk", flat=True):
        refresh_readiness(pk)
    return 4
