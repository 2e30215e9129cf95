"""The live revision's health: one honest word, never "fine" when replay cannot know.

Rows are made directly (probes and finished runs), so each state is exactly the
case it names; replay_now and the fake server are for the pipeline's own tests.
"""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from ledger import services as ledger_services
from replay import queries
from replay.models import Backend, Probe, Run
from tests.ledger.factories import RevisionFactory
from tests.replay.factories import BackendFactory, SampleSetFactory

pytestmark = pytest.mark.django_db

NOW = timezone.now()


@pytest.fixture
def live_backend():
    revision = RevisionFactory()
    ledger_services.set_live_revision(revision.service, revision, actor=None)
    revision.service.refresh_from_db()
    return BackendFactory(name="kb-vllm", revision=revision)


def _probe(backend: Backend, *, ago: dt.timedelta = dt.timedelta(minutes=5), **fields) -> Probe:
    fields.setdefault("reachable", True)
    return Probe.objects.create(
        backend=backend, fingerprint=backend.revision.fingerprint, started_at=NOW - ago, **fields
    )


def _run(backend: Backend, verdict: str, *, ago=dt.timedelta(minutes=5), reasons=()) -> Run:
    return Run.objects.create(
        backend=backend,
        revision=backend.revision,
        sample_set=SampleSetFactory(),
        fingerprint=backend.revision.fingerprint,
        state=Run.State.FINISHED,
        verdict=verdict,
        finished_at=NOW - ago,
        summary={"verdict_reasons": list(reasons)},
    )


def _health(backend: Backend):
    return queries.live_health(backend.revision.service, now=NOW)


def test_probed_and_replayed_recently_with_nothing_wrong_is_healthy(live_backend):
    _probe(live_backend)
    _run(live_backend, Run.Verdict.PASSED)

    health = _health(live_backend)

    assert health["word"] == "healthy"
    assert health["checked_at"] == NOW - dt.timedelta(minutes=5)


def test_a_latest_probe_that_could_not_reach_it_is_unreachable_with_when_and_why(live_backend):
    _probe(live_backend, ago=dt.timedelta(hours=2))
    _probe(live_backend, reachable=False, error="ConnectError: connection refused")

    health = _health(live_backend)

    assert health["word"] == "unreachable"
    reason = health["reasons"][0]
    assert reason["text"] == "the latest probe could not reach it: ConnectError: connection refused"
    assert reason["at"] == NOW - dt.timedelta(minutes=5)


def test_a_latest_run_that_reached_nothing_is_errored_not_failed(live_backend):
    _probe(live_backend)
    _run(
        live_backend,
        Run.Verdict.ERRORED,
        reasons=["the backend could not be reached: 9 of 9 attempts ended in connect_error"],
    )

    health = _health(live_backend)

    assert health["word"] == "errored"
    assert "9 of 9 attempts ended in connect_error" in health["reasons"][0]["text"]


def test_drift_found_by_the_latest_probe_is_drift(live_backend):
    _probe(
        live_backend,
        drift=[{"what": "served model", "registered": "qwen2.5-7b", "reported": "gemma-3"}],
    )
    _run(live_backend, Run.Verdict.PASSED)

    health = _health(live_backend)

    assert health["word"] == "drift"
    assert "served model registered qwen2.5-7b, reported gemma-3" in health["reasons"][0]["text"]


def test_a_regressed_latest_run_is_regressed(live_backend):
    _probe(live_backend)
    _run(live_backend, Run.Verdict.REGRESSED)

    assert _health(live_backend)["word"] == "regressed"


def test_nothing_within_two_probe_sweeps_is_stale(live_backend, settings):
    settings.REPLAY_PROBE_EVERY_MINUTES = 30
    _probe(live_backend, ago=dt.timedelta(minutes=61))

    health = _health(live_backend)

    assert health["word"] == "stale"
    assert (
        health["reasons"][0]["text"] == "not probed or replayed for 61 min; expected every 60 min"
    )


def test_a_backend_never_probed_is_stale(live_backend):
    assert _health(live_backend)["reasons"][0]["text"] == "never probed or replayed"


def test_no_backend_or_no_live_revision_is_not_monitored(db):
    revision = RevisionFactory()
    assert queries.live_health(revision.service)["word"] == "not monitored"  # no live revision
    ledger_services.set_live_revision(revision.service, revision, actor=None)
    revision.service.refresh_from_db()
    BackendFactory(revision=RevisionFactory(service=revision.service))  # serves another revision
    BackendFactory(revision=revision, enabled=False)

    health = queries.live_health(revision.service)

    assert health["word"] == "not monitored"
    assert "no enabled backend serves the live revision" in health["reasons"][0]["text"]


def test_the_worst_word_leads_and_every_reason_is_listed(live_backend):
    other = BackendFactory(name="kb-vllm-2", revision=live_backend.revision)
    _probe(live_backend, reachable=False, error="timed out")
    _probe(other)
    _run(other, Run.Verdict.REGRESSED)

    health = _health(live_backend)

    assert health["word"] == "unreachable"
    assert [(r["word"], r["backend"]) for r in health["reasons"]] == [
        ("unreachable", "kb-vllm"),
        ("regressed", "kb-vllm-2"),
    ]


def test_health_takes_a_fixed_number_of_queries(live_backend, django_assert_num_queries):
    for n in range(3):
        backend = BackendFactory(name=f"kb-extra-{n}", revision=live_backend.revision)
        _probe(backend)
        _run(backend, Run.Verdict.PASSED)

    # 1 the live revision's backends with the ids of their latest probe, latest
    # reachable probe and latest finished run, 2 those probes, 3 those runs.
    with django_assert_num_queries(3):
        queries.live_health(live_backend.revision.service, now=NOW)


def test_a_run_whose_backend_cannot_be_reached_is_errored_and_draws_no_trend(fake):
    from tests.replay.helpers import backend_on, make_set, replay_now, sample
    from tests.support.processes import free_port

    backend = backend_on(fake, base_url=f"http://127.0.0.1:{free_port()}", connect_timeout_s=2)
    sample_set = make_set("smoke", [sample(f"q{i}") for i in range(3)])

    run = replay_now(backend, sample_set)

    assert run.verdict == Run.Verdict.ERRORED
    assert run.summary["verdict_reasons"] == [
        "the backend could not be reached: 3 of 3 attempts ended in connect_error"
    ]
    trend = queries.backend_trend(backend)
    assert [point["pass_rate"] for point in trend] == [None]
    assert queries.trend_has_measurements(trend) is False
