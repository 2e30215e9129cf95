"""The closed loop against a real Prometheus scraping two fake vLLM engines whose latency
the test sets: a healthy candidate promoted stage by stage to released with no person
acting, a candidate whose TTFT doubles rolled back with the gateway's weights, Prometheus
stopped mid-stage held and never promoted, and a worker killed and restarted mid-stage
acting once.

Time is arranged, not waited for: a stage's start is moved back so that its window is
due (or has ended) now, and each tick measures the last interval of what Prometheus
really scraped — the test waits on Prometheus reporting the latency it set.
"""

from __future__ import annotations

import datetime as dt
import time
import uuid

import pytest
from django.db import connection
from django.utils import timezone

from config.celery import app
from ledger.models import Event
from releases.analysis.services import run_tick
from releases.gateway.queries import gateway
from releases.models import Observation, Release, Stage
from replay.models import Backend
from tests.releases.analysis.conftest import CANDIDATE_MODEL, LIVE_MODEL
from tests.releases.factories import build_world, file_release, roll_out
from tests.support.processes import celery_worker, child_env, database_url

INTERVAL_S = 10
GUARDS = {"ttft_p95_ms": {"max": 800, "max_increase_pct": 50, "critical": True}}
ANALYSIS = {
    "source": "prometheus",
    "interval_s": INTERVAL_S,
    "on_breach": "rollback",
    "auto_promote": True,
}
PLAN = [
    {"traffic_pct": share, "observation_minutes": 1, "guards": GUARDS, "analysis": ANALYSIS}
    for share in (10, 50, 100)
]
P95 = (
    "histogram_quantile(0.95, sum by (le, model_name) "
    f"(rate(vllm:time_to_first_token_seconds_bucket[{INTERVAL_S}s])))"
)
# Only bounds a hang: a worker starting on a busy machine may take a while.
PATIENCE_S = 240


@pytest.fixture
def lab(team, owner, signers, settings, prometheus):
    """canary-lab as the demo has it: an approved release whose stages are analysed."""
    settings.PROMETHEUS_URL = prometheus.url
    world = build_world(team, tier="experimental", slug="canary-lab")
    for backend, model in (
        (world.live_backend, LIVE_MODEL),
        (world.candidate_backend, CANDIDATE_MODEL),
    ):
        Backend.objects.filter(pk=backend.pk).update(
            model_name=model, engine="vllm", metrics_matcher=f'{{model_name="{model}"}}'
        )
    release = file_release(world, owner, gray_stages=PLAN)
    return roll_out(release, owner, signers)


def _serving(prometheus, live_ms: float, candidate_ms: float) -> None:
    """Wait until Prometheus reports each engine near the latency it now serves."""

    def near(result) -> bool:
        found = {s["metric"].get("model_name"): float(s["value"][1]) for s in result}
        # A p95 from buckets lands at most a bucket above the latency served.
        return all(
            target * 0.8 <= found.get(model, -1) * 1000 <= target * 1.5
            for model, target in ((LIVE_MODEL, live_ms), (CANDIDATE_MODEL, candidate_ms))
        )

    prometheus.wait_for(P95, near)
    # And a whole interval of scrapes of each: a tick measures the last interval.
    prometheus.wait_for(
        f"min by (model_name) (count_over_time(vllm:time_to_first_token_seconds_count[{INTERVAL_S}s]))",
        lambda result: (
            len(result) == 2 and all(float(s["value"][1]) >= INTERVAL_S - 1 for s in result)
        ),
    )


def _due(release: Release, *, seconds: float) -> Stage:
    """The stage carrying traffic, its start moved `seconds` back from now."""
    stage = release.stages.get(state__in=Stage.ACTIVE_STATES)
    Stage.objects.filter(pk=stage.pk).update(
        started_at=timezone.now() - dt.timedelta(seconds=seconds)
    )
    stage.refresh_from_db()
    return stage


def _next_tick(release: Release):
    """The next window of stage 1 is due now: one tick."""
    stage = release.stages.get(number=1)
    Stage.objects.filter(pk=stage.pk).update(
        started_at=stage.started_at - dt.timedelta(seconds=INTERVAL_S)
    )
    [outcome] = run_tick()
    return outcome


def _weights(slug: str) -> dict[str, int]:
    [route] = gateway([slug]).routes
    return {d.served_model: d.weight for d in route.deployments}


CANDIDATE_BACKEND = CANDIDATE_MODEL  # as the rendered config names what it serves


@pytest.mark.django_db
def test_a_healthy_candidate_is_promoted_stage_by_stage_to_released(
    lab, engine_traffic, prometheus
):
    live, candidate = engine_traffic
    live.traffic(rps=20, ttft_ms=200)
    candidate.traffic(rps=20, ttft_ms=210)
    _serving(prometheus, 200, 210)

    for number in (1, 2):
        stage = _due(lab, seconds=61)  # its one-minute window has ended
        assert stage.number == number
        [outcome] = run_tick()
        assert (outcome.verdict, outcome.action) == ("pass", "promote"), outcome

    lab.refresh_from_db()
    assert lab.state == Release.State.RELEASED
    assert lab.service.live_revision_id == lab.to_revision_id
    promoted = Event.objects.filter(action="release.promoted", subject_id=str(lab.pk))
    assert [e.actor for e in promoted] == [None, None]  # no person acted
    observation = Observation.objects.filter(stage__release=lab).first()
    assert observation.source == "prometheus"
    assert observation.candidate["ttft_p95_ms"] < 800
    assert observation.measurement["queries"][0]["sha256"]  # each raw answer's digest


@pytest.mark.django_db
def test_a_candidate_whose_ttft_doubles_is_rolled_back_with_the_gateways_weights(
    lab, engine_traffic, prometheus
):
    live, candidate = engine_traffic
    live.traffic(rps=20, ttft_ms=200)
    candidate.traffic(rps=20, ttft_ms=200)
    _serving(prometheus, 200, 200)
    _due(lab, seconds=INTERVAL_S + 1)
    [first] = run_tick()
    assert first.verdict == "pass"
    assert _weights("canary-lab")[CANDIDATE_BACKEND] > 0

    candidate.traffic(ttft_ms=400)  # twice the baseline's
    # Tick 1 as soon as Prometheus sees the change (its window part old, part new), tick
    # 2 once a whole interval is new (its fastest 5 % at the new latency): the beat's
    # ticks, an interval apart.
    _serving(prometheus, 200, 400)
    outcomes = [_next_tick(lab)]
    lab.refresh_from_db()
    if lab.state == Release.State.ROLLING_OUT:
        prometheus.wait_for(
            f'histogram_quantile(0.05, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket{{model_name="{CANDIDATE_MODEL}"}}[{INTERVAL_S}s])))',
            # Above 0.25 s, vLLM's bucket bound below 0.5 s: all but 5 % are new.
            lambda result: bool(result) and float(result[0]["value"][1]) > 0.25,
        )
        outcomes.append(_next_tick(lab))
        lab.refresh_from_db()

    # Rolled back mid-rollout: the rollout ends aborted, with its rollback on record.
    assert lab.state == Release.State.ABORTED, outcomes
    assert outcomes[-1].action == "rollback"
    assert lab.rollbacks.count() == 1
    acted = Event.objects.get(action="release.analysis_acted", subject_id=str(lab.pk))
    assert acted.actor is None and acted.payload_data["action"] == "rollback"
    assert "critical guard failed" in acted.payload_data["why"]
    assert not _weights("canary-lab").get(CANDIDATE_BACKEND)  # all back on the live revision


@pytest.mark.django_db
def test_prometheus_stopped_mid_stage_holds_it_and_never_promotes(lab, engine_traffic, prometheus):
    live, candidate = engine_traffic
    live.traffic(rps=20, ttft_ms=200)
    candidate.traffic(rps=20, ttft_ms=200)
    prometheus.stop()

    for _window in range(3):
        _due(lab, seconds=61 + _window * INTERVAL_S)
        [outcome] = run_tick()
        assert outcome.verdict == "error", outcome
        assert outcome.action in ("", "stop")

    stage = lab.stages.get(number=1)
    assert stage.state == Stage.State.HELD
    assert stage.analysis_paused_at is not None  # stopped after 3 errors in a row
    assert "Connect" in stage.analysis_pause_reason or "refused" in stage.analysis_pause_reason
    lab.refresh_from_db()
    assert lab.state == Release.State.ROLLING_OUT
    assert not Event.objects.filter(action="release.promoted", subject_id=str(lab.pk)).exists()


def _worker_env(queue: str, prometheus) -> dict[str, str]:
    return child_env(
        DATABASE_URL=database_url(connection.settings_dict),
        CELERY_TASK_DEFAULT_QUEUE=queue,
        PROMETHEUS_URL=prometheus.url,
    )


def _ran(worker, times: int) -> None:
    """Wait until the worker's own log says `run_analysis` succeeded `times` times."""
    deadline = time.monotonic() + PATIENCE_S
    seen: list[str] = []
    while time.monotonic() < deadline:
        line = worker.stdout.readline()
        if not line:
            break
        seen.append(line)
        if sum("run_analysis" in s and "succeeded" in s for s in seen) >= times:
            return
    raise AssertionError("the worker did not finish run_analysis:\n" + "".join(seen[-40:]))


@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_and_restarted_mid_stage_acts_once(lab, engine_traffic, prometheus):
    live, candidate = engine_traffic
    live.traffic(rps=20, ttft_ms=200)
    candidate.traffic(rps=20, ttft_ms=200)
    _serving(prometheus, 200, 200)
    _due(lab, seconds=61)
    queue = f"analysis-test-{uuid.uuid4().hex[:10]}"
    env = _worker_env(queue, prometheus)

    with celery_worker(env, queue) as first:
        app.send_task("run_analysis", queue=queue)
        _ran(first, 1)
        first.kill()  # no warm shutdown: as a node lost mid-stage
        first.wait()
    with celery_worker(env, queue) as second:
        # The beat's next tick and a redelivery of the first: the same window again.
        app.send_task("run_analysis", queue=queue)
        app.send_task("run_analysis", queue=queue)
        _ran(second, 2)

    lab.refresh_from_db()
    acted = Event.objects.filter(action="release.analysis_acted", subject_id=str(lab.pk))
    assert [e.payload_data["action"] for e in acted] == ["promote"]
    assert lab.stages.get(number=1).observations.count() == 1
    assert lab.stages.get(state__in=Stage.ACTIVE_STATES).number == 2  # one step, not two
