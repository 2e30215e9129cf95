"""The configuration `make run` uses: no servers, everything under DATA_DIR.

Each test starts from a copy of one SQLite database that `manage.py migrate` made on
these defaults (the `migrated_sqlite` fixture fails the tests if it cannot).
"""

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time

from tests.support.processes import (
    ROOT,
    celery_worker,
    embedded_env,
    http_get,
    run_manage,
    web_server,
)


def test_embedded_defaults_migrate_and_serve_on_sqlite(embedded_data_dir):
    env = embedded_env(embedded_data_dir)

    migrate = run_manage("migrate", "--noinput", "--check", env=env)
    assert migrate.returncode == 0, migrate.stderr  # nothing left unapplied

    with web_server(env) as base:
        ready_status, ready_text = http_get(f"{base}/readyz")
        login_status, login_page = http_get(f"{base}/accounts/login/")

    ready = json.loads(ready_text)
    assert ready_status == 200, ready
    assert ready["checks"]["database"]["vendor"] == "sqlite"
    assert ready["checks"]["broker"]["transport"] == "filesystem"
    assert login_status == 200
    assert "<h1>Log in</h1>" in login_page


def test_embedded_worker_runs_tasks_over_the_filesystem_broker(embedded_data_dir):
    scratch_dir = embedded_data_dir
    env = embedded_env(scratch_dir)

    with celery_worker(env, queue="celery"):
        sent = run_manage(
            "shell",
            "-c",
            "import json; from ledger.tasks import probe_worker; "
            "print(json.dumps(probe_worker.delay().get(timeout=60)))",
            env=env,
        )

    assert sent.returncode == 0, sent.stderr
    report = json.loads(sent.stdout.strip().splitlines()[-1])
    assert report["database_vendor"] == "sqlite"
    assert report["database_name"] == str(scratch_dir / "db.sqlite3")
    assert list((scratch_dir / "celery" / "results").iterdir()), "the result went through files"


def test_the_embedded_worker_stops_soon_after_ctrl_c(embedded_data_dir):
    # It used to hang in its warm shutdown for over a minute. The bound below only
    # catches a hang: the wait ends when the process group is gone.
    scratch_dir = embedded_data_dir
    env = embedded_env(scratch_dir)
    log = scratch_dir / "worker.log"
    with log.open("w") as out:
        worker = subprocess.Popen(
            ["scripts/embedded-worker.sh"],
            cwd=ROOT,
            env={**env, "PY": sys.executable},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 180
            while "ready." not in log.read_text():
                assert worker.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
            os.killpg(worker.pid, signal.SIGINT)  # what Ctrl-C sends the terminal's group
            worker.wait(timeout=45)
        finally:
            if worker.poll() is None:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait()

    text = log.read_text()
    assert "Warm shutdown" in text and "beat: Shutting down" in text
    assert "Cold shutdown" not in text  # it stopped by itself, nothing was cut short


_PAGES_SCRIPT = """
import datetime as dt, json
from django.contrib.auth import get_user_model
from django.test import Client
from ledger.models import Service
from releases.models import RollbackEvent, UnauthorizedChange
sre = get_user_model().objects.get(username="sre")
kb = Service.objects.get(slug="kb-assistant")
at = dt.datetime(2026, 11, 30, 8, 15, 42, 250000, tzinfo=dt.UTC)
UnauthorizedChange.objects.create(
    service=kb, expected_revision=kb.live_revision, detected_at=at,
    found=[{"what": "engine_version", "registered": "0.6.3", "reported": "0.7.1"}],
)
RollbackEvent.objects.create(
    service=kb, from_revision=kb.live_revision, to_revision=kb.live_revision, reason="drill",
    recorded_by=sre, started_at=at, state=RollbackEvent.State.VERIFYING,
)
client = Client(SERVER_NAME="localhost")
client.force_login(sre)
paths = ["/", "/services/", "/releases/", "/audit/"]
for slug in Service.objects.values_list("slug", flat=True):
    paths += [f"/services/{slug}/", f"/services/{slug}/incident/", f"/api/services/{slug}/incident/"]
statuses = {path: client.get(path).status_code for path in paths}
kb_incident = client.get("/api/services/kb-assistant/incident/").json()
print(json.dumps({
    "statuses": statuses,
    "finding": kb_incident["unauthorized_change"],
    "rollback": kb_incident["rollback"]["in_progress"],
}))
"""


def test_the_demo_pages_answer_on_sqlite(embedded_data_dir):
    """The embedded default is SQLite: every demo service's pages and incident screen
    render there too (no PostgreSQL-only SQL in them)."""
    env = embedded_env(embedded_data_dir)
    done = run_manage("seed_demo", "--quiet-logins", env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    pages = run_manage("shell", "-c", _PAGES_SCRIPT, env=env, timeout=600)
    assert pages.returncode == 0, pages.stderr[-3000:]
    answers = json.loads(pages.stdout.strip().splitlines()[-1])
    statuses = answers["statuses"]
    assert len(statuses) > 20
    assert {path: status for path, status in statuses.items() if status != 200} == {}
    # What SQLite hands back inside JSON objects (a moment without its offset) is read
    # as the moment stored.
    assert answers["finding"]["open"] == 1
    assert answers["finding"]["found"][0]["reported"] == "0.7.1"
    at = dt.datetime(2026, 11, 30, 8, 15, 42, 250000, tzinfo=dt.UTC)
    assert dt.datetime.fromisoformat(answers["finding"]["detected_at"]) == at
    assert answers["rollback"]["state"] == "verifying"
    assert dt.datetime.fromisoformat(answers["rollback"]["started_at"]) == at


def test_spans_are_stored_once_and_swept_by_rows_on_sqlite(embedded_data_dir):
    """No partitions on SQLite: a plain table, a retried span stored once, and the sweep
    deleting the old rows in batches, with its Event."""
    script = """
import datetime as dt, json
from django.test.utils import override_settings
from django.utils import timezone
from ledger.models import Event, ModelCallSpan
from ledger.traces.otlp import Extracted, SpanFacts
from ledger.traces.services import record_spans, sweep_traces
now = timezone.now()
def span(n, days):
    return SpanFacts(trace_id=f"{n + 1:032x}", span_id=f"{n + 1:016x}", parent_span_id="",
        name="chat", started_at=now - dt.timedelta(days=days), duration_ms=5.0, operation="chat")
old = span(1, 10)
record_spans(Extracted(spans=[span(0, 0), old]))
record_spans(Extracted(spans=[old]))  # an exporter's retry
stored = ModelCallSpan.objects.count()
with override_settings(RETENTION_TRACES_DAYS=5):
    swept = sweep_traces(actor=None)
print(json.dumps({"stored": stored, "left": ModelCallSpan.objects.count(), "swept": swept,
    "events": Event.objects.filter(action="retention.traces_swept").count()}))
"""
    env = embedded_env(embedded_data_dir)
    ran = run_manage("shell", "-c", script, env=env)
    assert ran.returncode == 0, ran.stderr
    said = json.loads(ran.stdout.strip().splitlines()[-1])
    assert said["stored"] == 2 and said["left"] == 1
    assert said["swept"]["rows_deleted"] == 1 and said["events"] == 1
