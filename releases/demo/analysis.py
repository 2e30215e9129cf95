"""canary-lab: an experimental service whose approved release runs itself through its gray
stages, judged from Prometheus.

Its live revision r1 and candidate r2 have one vLLM backend each, `canary-lab-live` and
`canary-lab-candidate` (their model names too), each selected in Prometheus by
``{model_name="<its model name>"}``. The release r1 → r2 is approved, not started; its
plan has three one-minute stages (10 %, 50 %, 100 %), each analysed every 10 s against
Prometheus (`on_breach: rollback`, `auto_promote: true`) with a critical guard on p95
TTFT (at most 800 ms, and at most 50 % worse than the baseline). Start it, point
PROMETHEUS_URL at a Prometheus scraping the two engines and it goes to 100 % by itself,
or back; with PROMETHEUS_URL unset each tick is an error observation and the stage
holds, never passes. Idempotent: nothing is added when canary-lab exists.
"""

from __future__ import annotations

from typing import Any

from ledger import services as ledger_services
from ledger.demo.registry import demo_policy
from ledger.demo.run_evidence import seed_run_evidence
from ledger.engines import Engine
from ledger.models import Revision, Service, TaskType
from ledger.services.gateway_policies import create_gateway_policy
from releases.cost.services import deferred_cost
from releases.demo.releases import _people, _submit_or_waive
from releases.demo.rollouts import _sign_all, live_and_candidate
from releases.governance import services
from releases.models import Release
from replay import outbound
from replay import services as replay_services
from replay.demo.backends import DEMO_BACKEND_URL

SLUG = "canary-lab"
ANALYSIS = {
    "source": "prometheus",
    "interval_s": 10,
    "on_breach": "rollback",
    "auto_promote": True,
}
GUARDS = {"ttft_p95_ms": {"max": 800, "max_increase_pct": 50, "critical": True}}
PLAN = [
    {"traffic_pct": share, "observation_minutes": 1, "guards": GUARDS, "analysis": ANALYSIS}
    for share in (10, 50, 100)
]


def _backend(revision: Revision, name: str) -> None:
    if outbound.base_url_problem(DEMO_BACKEND_URL):
        return
    replay_services.create_backend(
        actor=None,
        name=name,
        revision=revision,
        base_url=DEMO_BACKEND_URL,
        model_name=name,
        engine=Engine.VLLM,
        concurrency_limit=4,
        metrics_matcher=f'{{model_name="{name}"}}',
    )


def _release(service: Service, candidate: Revision, people: dict[str, Any]) -> Release:
    release = services.create_release(
        actor=people["owner"],
        service=service,
        to_revision=candidate,
        change_kind=Release.ChangeKind.MODEL_UPGRADE,
        summary="r2, promoted stage by stage by the rollout analysis.",
        impact_tenants=list(service.tenants or []),
        gray_stages=PLAN,
        rollback_kind=Release.RollbackKind.MODEL,
        rollback_triggers=["the analysis breaches p95 TTFT: it rolls back by itself"],
        rollback_expected_minutes=2,
        rollback_impact_scope="the lab's own traffic",
    )
    _submit_or_waive(release, people["owner"], people["admin"])
    _sign_all(release, people)
    release.refresh_from_db()
    return release


def seed_canary_lab() -> int:
    """Add canary-lab and its approved release; 1 when added, 0 when it exists."""
    if Service.objects.filter(slug=SLUG).exists():
        return 0
    people = _people()
    if people.get("owner") is None:
        return 0
    home = Service.objects.select_related("team").get(slug="support-summarizer")
    first = Revision.objects.get(service=home, number=1)
    second = Revision.objects.get(service=home, number=2)
    lab = ledger_services.create_service(
        actor=None,
        slug=SLUG,
        name="Canary lab",
        description="Tries closed-loop rollouts: its stages are judged from Prometheus.",
        team=home.team,
        tier=Service.Tier.EXPERIMENTAL,
        exposure=home.exposure,
        tenants=["lab"],
        slo_ttft_p95_ms=800,
        task_types=list(TaskType.objects.filter(slug="chat")),
    )
    policy = create_gateway_policy(
        lab,
        actor=None,
        document=demo_policy(lab.slug, lab.tenants, ["chat"], tier=lab.tier),
        note="The lab's limits.",
    )
    r1, r2 = live_and_candidate(
        lab,
        policy.label,
        first,
        second,
        notes=("What the lab serves now.", "The candidate the analysis promotes or rolls back."),
    )
    _backend(r1, "canary-lab-live")
    _backend(r2, "canary-lab-candidate")
    lab.refresh_from_db()
    _release(lab, r2, people)
    with deferred_cost():  # its 60 days' cost stored once
        seed_run_evidence([SLUG])
    return 1
