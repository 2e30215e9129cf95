"""A rollback verified by a real Celery worker: recording it queues the target's
verification replay, a worker process replays it against a real HTTP server on
loopback, and the rollback finishes with the run's verdict and its own duration.

The database is shared with the worker, so these tests commit (``transaction=True``)
and the tasks go to a queue of their own.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import pytest
from django.db import connection

from config.celery import app
from ledger.models import Event
from releases.governance import services
from releases.models import RollbackEvent
from tests.factories import UserFactory
from tests.ledger.factories import TeamFactory
from tests.releases.factories import build_world, file_release, observe, roll_out
from tests.replay.helpers import backend_on, make_set, sample
from tests.support.fake_openai import FakeOpenAI
from tests.support.processes import celery_worker, child_env, database_url

pytestmark = pytest.mark.django_db(transaction=True)

# Bounds a hang only: the test waits on the rollback's own state.
PATIENCE_S = 300
GOOD = {"requests": 1200, "ttft_p95_ms": 640, "error_rate_pct": 0.2, "json_valid_pct": 99.5}


@pytest.fixture
def queue():
    name = f"releases-test-{uuid.uuid4().hex[:10]}"
    before = app.conf.task_default_queue
    app.conf.task_default_queue = name
    yield name
    app.conf.task_default_queue = before


def wait_for(condition: Callable[[], object], what: str) -> object:
    deadline = time.monotonic() + PATIENCE_S
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {PATIENCE_S}s waiting for {what}")


def people():
    owner = UserFactory(username="olivia", roles=["model_owner"])
    team = TeamFactory(slug="kb-team", members=[owner])
    mona = UserFactory(username="mona", roles=["model_owner"])
    team.members.add(mona)
    signers = {
        "model_team": mona,
        "platform": UserFactory(username="sam", roles=["platform_sre"]),
        "security_compliance": UserFactory(username="sofia", roles=["security_compliance"]),
        "business_owner": UserFactory(username="ben", roles=["business_owner"]),
    }
    return owner, team, signers


def test_a_rollback_is_verified_by_a_worker_and_times_itself(queue):
    owner, team, signers = people()
    sre = signers["platform"]
    world = build_world(team)
    with FakeOpenAI() as fake:
        # The rollback target (the live revision) is served by the fake server.
        world.live_backend.enabled = False
        world.live_backend.save(update_fields=["enabled"])
        backend_on(fake, revision=world.live, name="kb-assistant-standby")
        make_set(world.verification_set.name, [sample(f"v{i}", "fake: reply=ok") for i in range(3)])
        release = roll_out(
            file_release(world, owner, path="emergency", emergency_reason="x"), owner, signers
        )
        for _ in range(2):
            observe(release, sre, GOOD)
            services.promote_release(release, actor=sre)
        release.refresh_from_db()
        assert release.state == "released"

        rollback = services.record_rollback(
            world.service, actor=sre, reason="p95 TTFT doubled", symptom="slow_first_token"
        )
        assert rollback.state == "verifying"
        env = child_env(
            DATABASE_URL=database_url(connection.settings_dict), CELERY_TASK_DEFAULT_QUEUE=queue
        )
        with celery_worker(env, queue) as worker:
            wait_for(
                lambda: RollbackEvent.objects.filter(pk=rollback.pk, state="succeeded").exists(),
                "the rollback to be verified",
            )
        assert "verify_rollback" in worker.output
        assert len(fake.requests) == 3

    rollback.refresh_from_db()
    run = rollback.verification_run
    assert (run.state, run.verdict, run.trigger) == ("finished", "passed", "verification")
    assert rollback.finished_at == run.finished_at
    assert rollback.duration == run.finished_at - rollback.started_at
    assert rollback.outcome_note == f"verification run #{run.pk} ({run.sample_set}) passed"
    finished = Event.objects.get(action="rollback.finished")
    assert finished.payload_data["outcome"] == "succeeded"
    assert finished.payload_data["duration_seconds"] == round(rollback.duration.total_seconds(), 3)
