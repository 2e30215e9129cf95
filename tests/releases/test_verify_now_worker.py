"""Verify now through a real Celery worker: the verification replay of a rollback target
against a real HTTP server on loopback passes and the service's readiness is judged
again; against a port nothing listens on it is *unknown* (awaits confirmation), not
failed, and so is a rollback whose verification reaches no backend.

The database is shared with the worker, so these tests commit (``transaction=True``)
and the tasks go to a queue of their own.
"""

from __future__ import annotations

import pytest
from django.db import connection

from ledger import services as ledger_services
from releases.governance import gates, services
from releases.models import ReadinessRecord, RollbackEvent
from replay import services as replay_services
from replay.models import Run
from tests.ledger.factories import RevisionFactory
from tests.releases.factories import build_world, complete_form
from tests.releases.test_rollback_worker import people, queue, wait_for  # noqa: F401  # fixture
from tests.replay.helpers import backend_on, make_set, sample
from tests.support.fake_openai import FakeOpenAI
from tests.support.processes import celery_worker, child_env, database_url, free_port

pytestmark = pytest.mark.django_db(transaction=True)


def _finished(run: Run) -> Run | None:
    run.refresh_from_db()
    return run if run.state in (Run.State.FINISHED, Run.State.FAILED) else None


def test_verify_now_passes_on_a_live_server_and_is_unknown_on_a_dead_port(queue):  # noqa: F811
    owner, team, signers = people()
    sre = signers["platform"]
    world = build_world(team)
    # r2 goes live outside a release: the target is r1, which served before.
    ledger_services.set_live_revision(world.service, world.candidate, actor=None, reason="r2")
    world.service.refresh_from_db()
    make_set(world.verification_set.name, [sample(f"v{i}", "fake: reply=ok") for i in range(2)])
    env = child_env(
        DATABASE_URL=database_url(connection.settings_dict), CELERY_TASK_DEFAULT_QUEUE=queue
    )
    with FakeOpenAI() as fake:
        world.live_backend.enabled = False
        world.live_backend.save(update_fields=["enabled"])
        standby = backend_on(fake, revision=world.live, name="kb-assistant-standby")
        with celery_worker(env, queue) as worker:
            run = services.verify_rollback_target(world.service, actor=owner)
            run = wait_for(lambda: _finished(run), "the verification to finish")
            assert (run.state, run.verdict, run.backend) == ("finished", "passed", standby)
            assert len(fake.requests) == 2
            record = wait_for(
                lambda: ReadinessRecord.objects.filter(
                    service=world.service, computed_at__gte=run.finished_at
                ).first(),
                "readiness to be judged again",
            )
            assert record.target == world.live
            assert not any("verification" in r["text"] for r in record.reasons), record.reasons

            # The standby's port now answers nothing.
            replay_services.update_backend(
                standby, actor=None, base_url=f"http://127.0.0.1:{free_port()}"
            )
            dead = services.verify_rollback_target(world.service, actor=sre)
            dead = wait_for(lambda: _finished(dead), "the unreachable verification to end")
            assert (dead.state, dead.verdict) == ("finished", "errored")
            record = wait_for(
                lambda: ReadinessRecord.objects.filter(
                    service=world.service, computed_at__gte=dead.finished_at
                ).first(),
                "readiness to be judged again",
            )
            [unknown] = [r for r in record.reasons if "verification" in r["text"]]
            assert unknown["verdict"] == "at risk"
            assert unknown["text"].startswith("r1 awaits confirmation")

            # A release going back to r1 waits for it: its gate is pending, not failed.
            release = services.create_release(
                actor=owner,
                service=world.service,
                to_revision=RevisionFactory(service=world.service, runtime=world.live.runtime),
                change_kind="model_upgrade",
                summary="the next fine-tune",
                rollback_target=world.live,
                **complete_form(world),
            )
            assert gates.assess(release).gate("rollback_plan")["status"] == "pending"

            # Rolling back to r1 now: its verification reaches no backend either.
            rollback = services.record_rollback(world.service, actor=sre, reason="errors at 4 %")
            assert rollback.to_revision == world.live
            assert rollback.state == "verifying"
            rollback = wait_for(
                lambda: RollbackEvent.objects.filter(
                    pk=rollback.pk, state="awaiting_confirmation"
                ).first(),
                "the rollback to await confirmation",
            )
        assert "verify_rollback_target" in worker.output
    assert rollback.finished_at is None
    assert rollback.verification_run.verdict == "errored"
    assert "could not reach its backend" in rollback.outcome_note
