"""Metrics and logs across real processes: a Celery worker (prefork, multiprocess mode)
serving its own exporter, gunicorn in multiprocess mode, and the request id of a page
request carried into the worker's log lines for the task it enqueued.

The database is shared with the child processes, so these tests commit.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import uuid

import pytest
from django.db import connection

from config.celery import app
from ledger.tasks import probe_worker
from replay.models import Run
from tests.ledger.factories import RevisionFactory
from tests.replay.helpers import SECRET, backend_on, make_set, sample
from tests.support.fake_openai import FakeOpenAI
from tests.support.metrics import sample_value
from tests.support.processes import (
    celery_worker,
    child_env,
    database_url,
    free_port,
    http_get,
    web_server,
)

pytestmark = pytest.mark.django_db(transaction=True)

CREDENTIAL_ENV = "LEDGER_BACKEND_KEY_METRICS_TEST"
SENSITIVE_REPLY = "Account 4417-1234-5678-9113 belongs to Jane Roe"


@pytest.fixture
def queue():
    name = f"metrics-test-{uuid.uuid4().hex[:10]}"
    before = app.conf.task_default_queue
    app.conf.task_default_queue = name
    yield name
    app.conf.task_default_queue = before


def wait_for(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def json_lines(output: str) -> list[dict]:
    lines = []
    for line in output.splitlines():
        if line.startswith("{"):
            lines.append(json.loads(line))
    return lines


def test_a_worker_counts_its_tasks_and_logs_the_enqueuing_request_id(
    client, owner, team, queue, tmp_path
):
    """One page request starts a replay against a backend with a credential; the
    prefork worker's children count it, its exporter serves the sum, and its log lines
    carry the request id and neither the credential nor the sensitive answer."""
    port = free_port()
    multiproc = tmp_path / "worker-metrics"
    multiproc.mkdir()
    env = child_env(
        DATABASE_URL=database_url(connection.settings_dict),
        CELERY_TASK_DEFAULT_QUEUE=queue,
        WORKER_METRICS_PORT=str(port),
        PROMETHEUS_MULTIPROC_DIR=str(multiproc),
        LOG_FORMAT="json",
        **{CREDENTIAL_ENV: SECRET},
    )
    request_id = f"proxy-{uuid.uuid4().hex[:16]}"
    with FakeOpenAI() as fake:
        fake.configure(api_key=SECRET)
        backend = backend_on(
            fake, revision=RevisionFactory(service__team=team), credential_env=CREDENTIAL_ENV
        )
        sample_set = make_set(
            "smoke",
            [
                sample("plain", "fake: reply=4"),
                sample("private", f'fake: reply="{SENSITIVE_REPLY}"', sensitive=True),
            ],
        )
        client.force_login(owner)

        with celery_worker(env, queue, pool="prefork") as worker:
            response = client.post(
                f"/replay/backends/{backend.name}/run",
                {"sample_set": sample_set.pk},
                HTTP_X_REQUEST_ID=request_id,
            )
            assert response.status_code == 302
            assert response["X-Request-ID"] == request_id
            run = Run.objects.get()
            wait_for(
                lambda: Run.objects.filter(pk=run.pk, state=Run.State.FINISHED).exists(),
                90,
                "the run to finish",
            )
            failed = app.send_task("probe_worker", args=["unexpected"], queue=queue)
            failed.get(timeout=60, propagate=False)
            assert failed.state == "FAILURE"
            assert probe_worker.apply_async(queue=queue).get(timeout=60)["pid"] != worker.pid

            # The child counts a task in task_postrun, after its result is sent: the
            # caller may read the result before the count is written, so wait for it.
            # The exporter is up once the worker is ready, which it was to answer.
            def counted(task: str) -> bool:
                text = http_get(f"http://127.0.0.1:{port}/metrics")[1]
                return (
                    sample_value(text, "ledger_celery_tasks_total", task=task, state="SUCCESS") > 0
                )

            wait_for(
                lambda: counted("probe_worker") and counted("run_replay"),
                60,
                "the worker to count the replay and the probe",
            )
            status, text = http_get(f"http://127.0.0.1:{port}/metrics")

    assert status == 200, text
    assert sample_value(text, "ledger_celery_tasks_total", task="run_replay", state="SUCCESS") == 1
    assert (
        sample_value(text, "ledger_celery_tasks_total", task="probe_worker", state="SUCCESS") == 1
    )
    assert sample_value(text, "ledger_celery_task_failures_total", task="probe_worker") == 1
    assert sample_value(text, "ledger_celery_task_duration_seconds_count", task="run_replay") == 1
    assert sample_value(text, "ledger_replay_runs_total", outcome=Run.Verdict.PASSED) == 1
    assert sample_value(text, "ledger_chain_appends_total", action="replay.run_finished") == 1
    # The children wrote their values to the shared folder; the main process read them.
    assert list(multiproc.glob("counter_*.db"))
    # The database gauges are the web's to report, once.
    assert "ledger_work_items" not in text

    output = worker.output
    task_lines = [line for line in json_lines(output) if line.get("request_id") == request_id]
    assert any("finished, passed" in line["message"] for line in task_lines), output[-3000:]
    # Beat's and the test's own tasks had no request: each got an id of its own.
    probe_lines = [
        line for line in json_lines(output) if "probe_worker answered" in line["message"]
    ]
    assert probe_lines and probe_lines[0]["request_id"] not in (None, request_id)
    assert SECRET not in output
    assert SENSITIVE_REPLY not in output
    assert "4417-1234" not in output


def test_the_worker_exporter_refuses_others_than_loopback_without_the_token():
    from lib.metrics import worker_metrics_app

    app_ = worker_metrics_app("exporter-token-0123456789")

    def call(**environ) -> str:
        statuses: list[str] = []
        base = {"REQUEST_METHOD": "GET", "REMOTE_ADDR": "127.0.0.1"}
        body = b"".join(app_({**base, **environ}, lambda status, headers: statuses.append(status)))
        return statuses[0] + " " + body.decode()[:40]

    assert call().startswith("200")
    assert call(REMOTE_ADDR="198.51.100.4").startswith("403")
    assert call(
        REMOTE_ADDR="198.51.100.4", HTTP_AUTHORIZATION="Bearer exporter-token-0123456789"
    ).startswith("200")
    assert call(REQUEST_METHOD="POST").startswith("405")


@pytest.mark.parametrize("loopback_without_token", [True, False])
def test_the_worker_exporter_asks_the_token_of_what_came_through_a_proxy(loopback_without_token):
    from lib.metrics import start_worker_exporter

    token = "exporter-token-0123456789"
    server = start_worker_exporter(
        "127.0.0.1", 0, token, loopback_without_token=loopback_without_token
    )
    assert server is not None
    base = f"http://127.0.0.1:{server.server_port}/metrics"

    def status(**headers: str) -> int:
        request = urllib.request.Request(base, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status
        except urllib.error.HTTPError as error:
            return error.code

    try:
        assert status() == (200 if loopback_without_token else 403)
        assert status(Forwarded="for=203.0.113.7") == 403
        assert status(**{"X-Real-IP": "203.0.113.7"}) == 403
        assert status(Via="1.1 nginx") == 403
        assert status(Via="1.1 nginx", Authorization=f"Bearer {token}") == 200
    finally:
        server.shutdown()
        server.server_close()


def test_gunicorn_in_multiprocess_mode_reports_what_its_workers_counted(tmp_path):
    multiproc = tmp_path / "web-metrics"
    multiproc.mkdir()
    env = child_env(
        DATABASE_URL=database_url(connection.settings_dict),
        PROMETHEUS_MULTIPROC_DIR=str(multiproc),
    )
    with web_server(env) as base:
        for _ in range(3):
            assert http_get(f"{base}/healthz")[0] == 200
        request = urllib.request.Request(f"{base}/healthz", headers={"X-Request-ID": "bad id!"})
        with urllib.request.urlopen(request, timeout=10) as response:
            generated = response.headers["X-Request-ID"]
        status, text = http_get(f"{base}/metrics")

    assert status == 200, text
    # The fixture's own readiness polls count too: at least the four above.
    assert sample_value(text, "ledger_http_requests_total", view="healthz", status="200") >= 4
    assert sample_value(text, "ledger_work_items", kind="replay_run", state="open") == 0
    assert list(multiproc.glob("counter_*.db"))
    assert generated != "bad id!" and len(generated) == 32
