"""seed_demo leaves releases and reviews in every state the flow has, each through the
verbs (reviews raised by the sweep itself)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.utils import timezone

from ledger.chain import verify_chain
from ledger.models import Event, Service
from releases.governance import gates
from releases.models import (
    Drill,
    GatewayCheck,
    Release,
    Review,
    ReviewAction,
    RollbackEvent,
    UnauthorizedChange,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("demo_world")]


def test_seed_demo_makes_releases_in_every_state_once():
    by_service = {(r.service.slug, r.state): r for r in Release.objects.select_related("service")}
    assert set(by_service) == {
        ("doc-translate", "draft"),
        ("kb-assistant", "submitted"),
        ("support-summarizer", "approved"),
        ("dataagent-sql", "rejected"),
        ("dataagent-sql", "rolling_out"),
        ("code-review-bot", "rolling_out"),
        ("kb-assistant", "rolled_back"),
        ("support-faq", "released"),
        ("canary-lab", "approved"),
    }
    releases = {
        state: r
        for (slug, state), r in by_service.items()
        if slug not in ("code-review-bot", "canary-lab")
    }

    draft = gates.assess(releases["draft"])
    assert any(g["key"] == "license" and g["status"] == "fail" for g in draft.gates)
    waiting = gates.assess(releases["submitted"])
    assert waiting.gate("signoffs")["status"] == "pending"
    assert gates.assess(releases["rejected"]).gate("signoffs")["status"] == "fail"
    emergency = gates.assess(releases["rolling_out"])
    assert releases["rolling_out"].path == "emergency"
    assert emergency.overdue
    assert "overdue since" in emergency.gate("signoffs")["reason"]

    # Every demo policy says what its tier needs: no release of the demo is held by it.
    for release in Release.objects.all():
        gate = gates.assess(release).gate("gateway_policy")
        assert gate is None or gate["status"] == "pass", (release.service.slug, gate)
    # Every GPU model of the demo has a price: no internal or production release is held
    # by the cost_record gate either.
    for release in Release.objects.select_related("service"):
        gate = gates.assess(release).gate("cost_record")
        applies = release.service.tier != "experimental"
        assert (gate is not None) is applies, release.service.slug
        assert gate is None or gate["status"] == "pass", (release.service.slug, gate)

    events = Event.objects.count()
    call_command("seed_demo", "--quiet-logins")  # idempotent
    assert Release.objects.count() == 9
    assert Review.objects.count() == 4
    assert UnauthorizedChange.objects.filter(kind="gateway").count() == 1
    assert Event.objects.count() == events
    assert verify_chain().ok


def test_the_demo_gateway_routes_the_rolling_out_candidate_at_its_stage_share():
    """The demo's backends are not monitored (nothing serves their port) but routed."""
    from releases.gateway.queries import gateway
    from replay.models import Backend

    [route] = gateway(["dataagent-sql"]).routes
    release = Release.objects.get(service__slug="dataagent-sql", state="rolling_out")
    candidate = set(
        Backend.objects.filter(revision=release.to_revision_id).values_list("pk", flat=True)
    )
    shares = {d.backend_id in candidate: d.weight for d in route.deployments}
    assert shares == {False: 9_000, True: 1_000}  # the stage carrying traffic: 10 %


def test_every_live_demo_revision_runs_a_policy_with_limits_tenants_and_degradation():
    from ledger.models import Service

    for service in Service.objects.select_related("live_revision__gateway_policy"):
        document = service.live_revision.gateway_policy.document
        assert document is not None, service.slug
        assert set(document["limits"]) >= {"max_input_tokens", "max_output_tokens"}, service.slug
        assert [t["name"] for t in document["tenants"]] == service.tenants, service.slug
        served = set(service.task_types.values_list("slug", flat=True))
        assert set(document["degradation"]) == served, service.slug


def test_seed_demo_shows_every_variant_of_the_incident_screen(client):
    """Stable, rolling out at 10 %, guard breached, rolled back, never released, target
    not verified for 30 days: each on its own demo service."""
    client.force_login(get_user_model().objects.get(username="sre"))

    def screen(slug: str) -> dict:
        return client.get(f"/api/services/{slug}/incident/").json()

    breached = screen("code-review-bot")
    assert breached["rollout"]["breached"] is True
    assert "critical guard failed" in breached["rollout"]["why"]
    html = client.get("/services/code-review-bot/incident/").content.decode()
    assert "Roll back first" in html

    rolling = screen("dataagent-sql")
    assert (rolling["rollout"]["traffic_pct"], rolling["rollout"]["breached"]) == (10.0, False)

    rolled_back = RollbackEvent.objects.get(service__slug="kb-assistant")
    assert rolled_back.state == "succeeded"
    assert screen("kb-assistant")["live"]["set_by"]["cause"] == {"rollback": rolled_back.pk}

    stable = screen("support-faq")
    assert stable["rollout"] is None
    assert stable["live"]["set_by"]["cause"]["release"] is not None
    assert stable["rollback"]["last_verification"]["verdict"] == "passed"

    stale = screen("support-summarizer")["rollback"]
    assert any(
        "its last verification passed 31 days ago" in reason["text"]
        for reason in stale["readiness"]["reasons"]
    ), stale["readiness"]

    never = screen("doc-translate")
    assert never["rollback"]["plan_release"] is None
    assert not Release.objects.filter(service__slug="doc-translate", state="released").exists()


def test_seed_demo_leaves_a_review_in_each_state_one_raised_by_the_latency_drift(client):
    reviews = {r.service.slug: r for r in Review.objects.select_related("service")}

    assert {slug: r.state for slug, r in reviews.items()} == {
        "kb-assistant": "open",
        "dataagent-sql": "in_progress",
        "support-faq": "overdue",
        "support-summarizer": "concluded",
    }
    drift = reviews["kb-assistant"].triggers.get(kind="latency_drift")
    assert drift.numbers["above_slo"] is True
    assert drift.numbers["ttft_p95_7d_ms"] > drift.numbers["slo_ttft_p95_ms"] == 800
    assert reviews["support-faq"].due_on < timezone.now().date()
    assert Event.objects.filter(action="review.overdue").count() == 1
    concluded = reviews["support-summarizer"]
    assert concluded.outcome == "pass_with_actions"
    assert concluded.triggers.get().kind == "rollback_verification"
    assert ReviewAction.objects.get().service.slug == "support-summarizer"

    client.force_login(get_user_model().objects.get(username="sre"))
    mine = client.get("/reviews/mine/").content.decode()
    assert "kb-assistant" in mine and '<span class="badge bad">overdue</span>' in mine
    page = client.get("/services/support-summarizer/").content.decode()
    assert "Replay the verification set against support-summarizer r1" in page


def test_the_demos_rollback_leaves_the_rolled_back_revision_out_of_the_default(client):
    """kb-assistant's rollback #1 took its gateway-policy revision off: the incident
    screen names an earlier revision as the target and says why not that one."""
    rollback = RollbackEvent.objects.select_related("from_revision").get(
        service__slug="kb-assistant"
    )
    client.force_login(get_user_model().objects.get(username="sre"))
    answer = client.get("/api/services/kb-assistant/incident/").json()["rollback"]
    assert answer["target"] is not None
    assert answer["target"]["id"] not in (rollback.from_revision_id, rollback.to_revision_id)
    assert answer["passed_over"]["revision"]["id"] == rollback.from_revision_id
    assert answer["passed_over"]["rollback"] == rollback.pk
    form = client.get("/services/kb-assistant/rollbacks/new/").content.decode()
    assert f'<option value="{answer["target"]["id"]}" selected>' in form
    assert 'id="passed-over"' in form


def test_the_demos_backends_are_not_monitored_and_verify_now_says_why(client):
    """Nothing listens on the demo backends' address: they are disabled (health reads
    *not monitored*), so nothing probes or replays them, and Verify now is not offered
    for a target nothing can replay."""
    from replay.demo import DEMO_BACKEND_URL
    from replay.models import Backend

    demo = Backend.objects.filter(base_url=DEMO_BACKEND_URL)
    assert demo.exists() and not demo.filter(enabled=True).exists()
    client.force_login(get_user_model().objects.get(username="sre"))
    answer = client.get("/api/services/support-faq/incident/").json()
    assert answer["health"]["word"] == "not monitored"
    assert answer["rollback"]["verify_now"] == {"backend": None, "pending_run": None}
    page = client.get("/services/support-faq/incident/").content.decode()
    assert "no enabled backend serves it" in page
    assert Event.objects.filter(action="replay.backend_updated").count() == demo.count()


def test_seed_demo_leaves_one_service_with_a_drifted_gateway(client):
    """dataagent-sql's emergency rollout was never applied to the gateway: an open finding
    of kind gateway, read as sentences on its incident screen; every other service was
    in sync when the demo recorded it."""

    [finding] = UnauthorizedChange.objects.filter(kind="gateway")
    assert finding.service.slug == "dataagent-sql" and finding.reconciled_at is None
    assert {item["what"] for item in finding.found} == {"weight", "deployment"}
    states = dict(GatewayCheck.objects.values_list("service__slug", "state"))
    assert states.pop("dataagent-sql") == "drifted"
    assert set(states.values()) == {"in_sync"}

    client.force_login(get_user_model().objects.get(username="sre"))
    page = " ".join(client.get("/services/dataagent-sql/incident/").content.decode().split())
    assert "the gateway serves dataagent-sql with weight 10000 on deployment" in page
    assert 'data-gateway="drifted"' in page


def test_the_demos_canary_lab_is_approved_for_its_analysis_and_holds_without_prometheus(
    settings,
):
    import datetime as dt

    from releases.analysis.services import run_tick
    from releases.governance import services

    settings.PROMETHEUS_URL = ""
    release = Release.objects.select_related("service").get(service__slug="canary-lab")
    assert release.service.tier == "experimental" and release.state == "approved"
    assert [s["traffic_pct"] for s in release.gray_stages] == [10, 50, 100]
    for stage in release.gray_stages:
        assert stage["observation_minutes"] == 1
        assert stage["analysis"] == {
            "source": "prometheus",
            "interval_s": 10,
            "on_breach": "rollback",
            "auto_promote": True,
        }
        assert stage["guards"] == {
            "ttft_p95_ms": {"max": 800, "max_increase_pct": 50, "critical": True}
        }
    backends = {
        b.revision.label: (b.name, b.model_name, b.metrics_matcher)
        for b in release.service.live_revision.backends.all() | release.to_revision.backends.all()
    }
    assert backends == {
        "r1": ("canary-lab-live", "canary-lab-live", '{model_name="canary-lab-live"}'),
        "r2": (
            "canary-lab-candidate",
            "canary-lab-candidate",
            '{model_name="canary-lab-candidate"}',
        ),
    }

    sre = get_user_model().objects.get(username="sre")
    services.start_rollout(release, actor=sre)
    stage = release.stages.get(number=1)
    [outcome] = run_tick(now=stage.started_at + dt.timedelta(seconds=11))

    stage.refresh_from_db()
    assert outcome.verdict == "error" and stage.state == "held"
    release.refresh_from_db()
    assert release.state == "rolling_out"


def test_the_demo_has_a_concluded_month_end_drill_and_the_next_one_planned(client):
    concluded, planned = Drill.objects.order_by("pk")
    assert (concluded.state, planned.state) == ("concluded", "planned")
    assert {s.slug for s in concluded.services.all()} == {"kb-assistant", "dataagent-sql"}
    results = concluded.results
    assert results["by_task_type"]["sql"]["verdict"] == "missed"
    assert results["by_task_type"]["chat"]["verdict"] == "met"
    # sql slows past 30/s: every task type met its bounds up to the second stage only.
    assert results["knee_rate"] == 30
    assert concluded.conclusion["degraded"] == ["sql"]
    assert concluded.conclusion["temporary_cost"]["currency"] == "USD"
    assert planned.window_starts_at > concluded.window_starts_at

    client.force_login(get_user_model().objects.get(username="business"))
    page = client.get(f"/drills/{concluded.pk}/").content.decode()
    assert "every task type met its bounds up to 30" in page


def test_the_demo_has_a_complaints_trace_to_explain(client):
    from releases.demo import DEMO_TRACE
    from releases.explain.queries import explain_trace

    first, retried, elsewhere = explain_trace(DEMO_TRACE)
    kb = Service.objects.get(slug="kb-assistant")
    assert (first.approved_as, retried.approved_as) == ("live", "live")
    assert first.revision == kb.live_revision and first.findings == []
    assert retried.happened == [
        "degraded: shorter-context",
        "retried 1 time",
        "cut short at the token limit (finish reason: length)",
    ]
    assert elsewhere.approved_as == "unknown" and elsewhere.service.slug == "dataagent-sql"
    assert "no registered backend answers at sql-gpu7.internal:8000" in elsewhere.findings[0]

    client.force_login(get_user_model().objects.get(username="sre"))
    found = client.get("/search/", {"q": DEMO_TRACE})
    page = client.get(found["Location"]).content.decode()
    assert page.count("the live revision") == 2 and "unknown backend" in page
