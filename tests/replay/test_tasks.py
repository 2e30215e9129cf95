"""Replay tasks in real Celery worker (and beat) processes over the real Redis broker.

The database is shared with the child processes, so these tests commit
(``transaction=True``) and tasks go to a queue of their own.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator

import pytest
from django.db import connection
from django.utils import timezone
from django_celery_beat.models import IntervalSchedule

from config.celery import app
from ledger.models import Event
from replay import services, tasks
from replay.models import Run
from replay.services import runs as runs_services
from tests.replay.helpers import backend_on, make_set, sample
from tests.support.processes import ROOT, celery_worker, child_env, database_url

pytestmark = pytest.mark.django_db(transaction=True)

HEARTBEAT_S = 1
STALE_S = 3


@pytest.fixture
def queue(settings):
    """A queue of this test's own: what it enqueues (and its workers enqueue) lands there."""
    name = f"replay-test-{uuid.uuid4().hex[:10]}"
    before = app.conf.task_default_queue
    app.conf.task_default_queue = name
    settings.REPLAY_HEARTBEAT_SECONDS = HEARTBEAT_S
    settings.REPLAY_STALE_AFTER_SECONDS = STALE_S
    yield name
    app.conf.task_default_queue = before


@pytest.fixture
def env(queue):
    return child_env(
        DATABASE_URL=database_url(connection.settings_dict),
        CELERY_TASK_DEFAULT_QUEUE=queue,
        REPLAY_HEARTBEAT_SECONDS=str(HEARTBEAT_S),
        REPLAY_STALE_AFTER_SECONDS=str(STALE_S),
    )


# Deadlines only bound a hang: a worker and beat starting on a machine busy with other
# suites may take minutes, and the tests wait on the event itself, not on a clock.
PATIENCE_S = 300


def wait_for(condition: Callable[[], object], timeout: float, what: str) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


@contextlib.contextmanager
def celery_beat(env: dict[str, str]) -> Iterator[subprocess.Popen]:
    """A real beat process with the database scheduler, checking for due tasks every second."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "config",
            "beat",
            "--loglevel",
            "INFO",
            "--max-interval",
            "1",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _state(run_id: int) -> str:
    return Run.objects.values_list("state", flat=True).get(pk=run_id)


def test_run_replay_executes_a_queued_run_in_a_worker(fake, queue, env):
    backend = backend_on(fake)
    sample_set = make_set("smoke", [sample(f"s{i}", "fake: reply=4") for i in range(3)])

    run = services.start_run(actor=None, backend=backend, sample_set=sample_set)
    with celery_worker(env, queue):
        wait_for(lambda: _state(run.pk) == Run.State.FINISHED, PATIENCE_S, "the run to finish")

    run.refresh_from_db()
    assert (run.verdict, run.attempts, run.results.count()) == ("passed", 1, 3)
    assert Event.objects.filter(action="replay.run_finished", subject_id=str(run.pk)).exists()


def test_a_worker_killed_mid_run_is_reaped_and_a_restarted_worker_finishes_it(fake, queue, env):
    # Each answer drips: about 1.6 s a request, two at a time.
    fake.configure(fault="drip", drip_after=1, drip_gap_ms=300, tokens=5)
    backend = backend_on(fake, concurrency_limit=2)
    keys = [f"s{i}" for i in range(5)]
    sample_set = make_set("slow", [sample(key, "Tell me something.", repeat=2) for key in keys])
    run = services.start_run(actor=None, backend=backend, sample_set=sample_set)

    with celery_worker(env, queue) as worker:
        wait_for(lambda: run.results.count() >= 2, PATIENCE_S, "the first results")
        worker.send_signal(signal.SIGKILL)
        worker.wait(10)
    kept = run.results.count()
    assert 2 <= kept < 10
    assert _state(run.pk) == Run.State.RUNNING

    # Nothing beats for the dead worker: once its last heartbeat is older than the stale
    # period, the reaper interrupts the run and queues it again.
    wait_for(
        lambda: services.reap_stale_runs() == [run.pk],
        PATIENCE_S,
        "the reaper to find the run stale",
    )
    assert _state(run.pk) == Run.State.INTERRUPTED
    event = Event.objects.get(action="replay.run_interrupted")
    assert event.payload_data["results_kept"] == kept

    with celery_worker(env, queue):
        wait_for(
            lambda: _state(run.pk) == Run.State.FINISHED, PATIENCE_S, "the resumed run to finish"
        )

    run.refresh_from_db()
    counts = Counter(run.results.values_list("sample__key", "attempt"))
    assert counts == {(key, attempt): 1 for key in keys for attempt in (1, 2)}
    assert run.attempts == 2
    assert run.verdict == Run.Verdict.PASSED
    # Only what was missing went out again (plus the requests cut by the kill).
    assert len(fake.chat_requests) <= 10 + 2


def test_the_reaper_leaves_live_runs_alone(fake, queue):
    backend = backend_on(fake)
    sample_set = make_set("live", [sample("s", "fake: reply=4")])
    run = services.start_run(actor=None, backend=backend, sample_set=sample_set)
    Run.objects.filter(pk=run.pk).update(
        state=Run.State.RUNNING, heartbeat_at=timezone.now(), attempts=1
    )

    assert tasks.reap_stale_runs() == []
    assert _state(run.pk) == Run.State.RUNNING


def test_two_reapers_at_once_reap_a_stale_run_once(fake, queue, monkeypatch):
    backend = backend_on(fake)
    sample_set = make_set("stale", [sample("s", "fake: reply=4")])
    run = services.start_run(actor=None, backend=backend, sample_set=sample_set)
    stale = timezone.now() - dt.timedelta(seconds=STALE_S + 1)
    Run.objects.filter(pk=run.pk).update(state=Run.State.RUNNING, heartbeat_at=stale, attempts=1)

    take_lock = runs_services.try_singleton_lock
    both_asked = threading.Barrier(2, timeout=30)
    granted: list[bool] = []

    def take_lock_then_wait_for_the_other(name: str) -> bool:
        # Each reaper asks inside its own transaction, then waits until the other has
        # asked too: whoever got the lock still holds it when the other asks.
        got = take_lock(name)
        granted.append(got)
        both_asked.wait()
        return got

    monkeypatch.setattr(runs_services, "try_singleton_lock", take_lock_then_wait_for_the_other)
    requeued: list[list[int]] = []

    def reaper() -> None:
        # A thread of its own, as a second beat or worker would be: its own connection.
        try:
            requeued.append(tasks.reap_stale_runs())
        finally:
            connection.close()

    reapers = [threading.Thread(target=reaper) for _ in range(2)]
    for thread in reapers:
        thread.start()
    for thread in reapers:
        thread.join(60)

    assert sorted(granted) == [False, True]
    assert sorted(requeued) == [[], [run.pk]]
    assert _state(run.pk) == Run.State.INTERRUPTED
    assert Event.objects.filter(action="replay.run_interrupted").count() == 1


def test_a_run_that_keeps_killing_its_worker_is_failed_not_resumed_forever(fake, queue, settings):
    settings.REPLAY_MAX_ATTEMPTS = 3
    backend = backend_on(fake)
    sample_set = make_set("poison", [sample("s", "fake: reply=4")])
    run = services.start_run(actor=None, backend=backend, sample_set=sample_set)
    stale = timezone.now() - dt.timedelta(seconds=STALE_S + 1)
    Run.objects.filter(pk=run.pk).update(state=Run.State.RUNNING, heartbeat_at=stale, attempts=3)

    assert services.reap_stale_runs() == []

    run.refresh_from_db()
    assert (run.state, run.verdict) == ("failed", "failed")
    assert "stopped 3 times" in run.summary["error"]


def test_a_schedule_fires_through_beat_and_its_run_finishes(fake, queue, env):
    backend = backend_on(fake)
    make_set("nightly", [sample("s", "fake: reply=4")])
    schedule = services.create_schedule(
        actor=None, backend=backend, sample_set_name="nightly", crontab="0 3 * * *"
    )
    # A crontab fires at most once a minute: for the test the same PeriodicTask runs
    # once, on an interval of one second.
    task = schedule.periodic_task
    task.interval = IntervalSchedule.objects.create(every=1, period=IntervalSchedule.SECONDS)
    task.crontab = None
    task.one_off = True
    task.save()

    with celery_beat(env), celery_worker(env, queue):
        run = wait_for(
            lambda: Run.objects.filter(
                trigger=Run.Trigger.SCHEDULE, state=Run.State.FINISHED
            ).first(),
            PATIENCE_S,
            "a scheduled run to finish",
        )

    assert run.backend == backend and run.sample_set.name == "nightly"
    assert run.verdict == Run.Verdict.PASSED
    assert Run.objects.count() == 1
