"""Open-loop shards on real Celery worker processes over the real Redis broker.

Two workers on a queue of this test's own; the database is shared with them, so the
tests commit (``transaction=True``). A worker killed mid-run: its shard is re-run once
or reported missing, and the merged totals never count an arrival twice.
"""

from __future__ import annotations

import signal
import socket
import threading
import time
import uuid

import pytest
from django.db import connection

from config.celery import app
from replay.openloop.plan import PlanInvalid
from replay.openloop.shards import build_plan, run_in_process, run_sharded
from tests.replay.helpers import backend_on, make_set, sample
from tests.support.fake_openai import FakeOpenAI
from tests.support.processes import celery_worker, child_env, database_url

pytestmark = pytest.mark.django_db(transaction=True)

PATIENCE_S = 300  # workers starting on a busy machine; the test waits on the event
GRACE_S = 5  # a live worker's result arrives well within it; a dead one's never does


@pytest.fixture
def queue():
    name = f"openloop-test-{uuid.uuid4().hex[:10]}"
    before = app.conf.task_default_queue
    app.conf.task_default_queue = name
    yield name
    app.conf.task_default_queue = before


@pytest.fixture
def env(queue):
    return child_env(
        DATABASE_URL=database_url(connection.settings_dict), CELERY_TASK_DEFAULT_QUEUE=queue
    )


@pytest.fixture
def fake():
    with FakeOpenAI(ttft_ms=20, tokens=2) as server:
        yield server


def wait_for_workers(*names: str) -> None:
    wanted = {f"{name}@{socket.gethostname()}" for name in names}
    deadline = time.monotonic() + PATIENCE_S
    while time.monotonic() < deadline:
        answered = {node for reply in app.control.ping(timeout=1) for node in reply}
        if wanted <= answered:
            return
    raise AssertionError(f"workers {sorted(wanted)} did not answer a ping")


def spec_for(fake, *, duration_s: float, rate: float = 10, ceiling: int = 50) -> dict:
    backend = backend_on(fake, total_timeout_s=10)
    kb = make_set("kb", [sample(f"k{i}", "Tell me something.") for i in range(3)])
    sql = make_set("sql", [sample("s1", "fake: ttft_ms=40"), sample("side", rerunnable=False)])
    return {
        "backend_id": backend.pk,
        "mix": [
            {"task_type": "kb", "sample_set_id": kb.pk, "weight": 3},
            {"task_type": "sql", "sample_set_id": sql.pk, "weight": 1},
        ],
        "arrival": {"type": "constant", "rate": rate, "duration_s": duration_s},
        "seed": 32,
        "ceiling": ceiling,
    }


def test_two_workers_run_the_shards_and_the_merge_is_the_plan_exactly(fake, queue, env):
    spec = spec_for(fake, duration_s=3)
    plan = build_plan(spec)
    with celery_worker(env, queue, name=f"{queue}-a"), celery_worker(env, queue, name=f"{queue}-b"):
        wait_for_workers(f"{queue}-a", f"{queue}-b")
        merged = run_sharded(spec, shards=2, lead_s=3, grace_s=GRACE_S)

    assert merged["missing"] == {} and merged["reruns"] == []
    assert merged["workers"] == 2 and merged["completed"] == [0, 1]
    assert [row[0] for row in merged["rows"]] == [a.index for a in plan.arrivals()]
    assert merged["planned"] == merged["counted"] == len(plan.arrivals()) == 30
    assert len(fake.chat_requests) == 30  # each arrival sent once, by one worker
    types = [row[merged["columns"].index("task_type")] for row in merged["rows"]]
    assert types == [a.task_type for a in plan.arrivals()]  # the same seeded schedule
    by_type = merged["summary"]["by_task_type"]
    assert by_type["kb"]["requests"] + by_type["sql"]["requests"] == 30
    assert "side" not in {row[merged["columns"].index("sample")] for row in merged["rows"]}


def test_a_shard_whose_worker_is_killed_is_rerun_once_and_never_double_counted(fake, queue, env):
    spec = spec_for(fake, duration_s=6)
    plan = build_plan(spec)
    with (
        celery_worker(env, queue, name=f"{queue}-a") as a,
        celery_worker(env, queue, name=f"{queue}-b"),
    ):
        wait_for_workers(f"{queue}-a", f"{queue}-b")
        outcome: dict = {}
        runner = threading.Thread(
            target=lambda: outcome.update(run_sharded(spec, shards=2, lead_s=3, grace_s=GRACE_S)),
            daemon=True,
        )
        runner.start()
        fake.wait_for_chat_requests(10, timeout=PATIENCE_S)  # both shards are sending
        a.send_signal(signal.SIGKILL)
        a.wait(10)
        runner.join(PATIENCE_S)
    merged = outcome
    assert merged, "run_sharded did not return"
    assert merged["missing"] == {}
    assert len(merged["reruns"]) == 1  # worker a's shard, run again by b
    (rerun,) = merged["reruns"]
    assert merged["workers"] == 1
    # The union is the plan exactly: every arrival once, the re-run shard whole.
    assert [row[0] for row in merged["rows"]] == [a.index for a in plan.arrivals()]
    assert merged["summary"]["overall"]["planned"] == 60
    # What the killed worker sent before it died is not counted (the server saw it).
    sent_by_killed = len(fake.chat_requests) - 60
    assert 0 < sent_by_killed <= len(plan.shard(rerun, 2))


def test_a_killed_shard_is_reported_missing_when_not_rerun(fake, queue, env):
    spec = spec_for(fake, duration_s=4)
    plan = build_plan(spec)
    with (
        celery_worker(env, queue, name=f"{queue}-a") as a,
        celery_worker(env, queue, name=f"{queue}-b"),
    ):
        wait_for_workers(f"{queue}-a", f"{queue}-b")
        outcome: dict = {}
        runner = threading.Thread(
            target=lambda: outcome.update(
                run_sharded(spec, shards=2, lead_s=3, grace_s=GRACE_S, rerun_missing=False)
            ),
            daemon=True,
        )
        runner.start()
        fake.wait_for_chat_requests(6, timeout=PATIENCE_S)
        a.send_signal(signal.SIGKILL)
        a.wait(10)
        runner.join(PATIENCE_S)
    merged = outcome
    (missing,) = (int(k) for k in merged["missing"])
    kept = 1 - missing
    assert merged["completed"] == [kept] and merged["workers"] == 1
    assert [row[0] for row in merged["rows"]] == [a.index for a in plan.shard(kept, 2)]
    assert merged["counted"] == len(plan.shard(kept, 2)) < merged["planned"] == 40
    assert merged["summary"]["overall"]["planned"] == merged["counted"]


def test_a_spec_runs_in_this_process_without_celery(fake):
    spec = spec_for(fake, duration_s=1)
    merged = run_in_process(spec)
    assert (merged["workers"], merged["completed"], merged["counted"]) == (1, [0], 10)
    assert len(fake.chat_requests) == 10
    assert set(merged["summary"]["by_task_type"]) <= {"kb", "sql"}


def test_a_spec_with_no_rerunnable_sample_is_refused_naming_the_entry(fake):
    spec = spec_for(fake, duration_s=1)
    only_side = make_set("side-effects", [sample("refund", rerunnable=False)])
    spec["mix"][1]["sample_set_id"] = only_side.pk
    with pytest.raises(PlanInvalid) as refused:
        build_plan(spec)
    assert "mix[1].samples" in refused.value.errors
