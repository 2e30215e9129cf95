"""The releases app's tasks in a real Celery worker process over the real Redis broker:
an export built while the request returned at once, and a webhook delivery retried with
back-off against a receiver that fails twice.

The database is shared with the worker, so these tests commit (``transaction=True``)
and tasks go to a queue of their own.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
import zipfile

import pytest
from django.db import connection
from standardwebhooks import Webhook

from config.celery import app
from ledger import signing
from ledger.models import Event
from releases.audit import tasks
from releases.audit.records import AuditFilters
from releases.audit.services import exports, webhooks
from releases.governance import services
from releases.models import Delivery, Export
from tests.ledger.factories import ServiceFactory
from tests.releases.factories import file_release
from tests.releases.test_exports import VERIFIER
from tests.support.processes import celery_worker, child_env, database_url
from tests.support.webhook_receiver import receiving

pytestmark = pytest.mark.django_db(transaction=True)

# Only bounds a hang: a worker starting on a busy machine may take a while.
PATIENCE_S = 240


@pytest.fixture
def queue():
    name = f"releases-test-{uuid.uuid4().hex[:10]}"
    before = app.conf.task_default_queue
    app.conf.task_default_queue = name
    yield name
    app.conf.task_default_queue = before


@pytest.fixture
def signing_key():
    """The suite's one key (LEDGER_SIGNING_KEY_FILE), which this process and the worker
    both sign with, as a deployment's processes share theirs: the bundle is checked
    against its public half."""
    return signing.public_key_pem().encode()


def wait_for(condition, what: str):
    deadline = time.monotonic() + PATIENCE_S
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_worker_builds_a_bundle_requested_in_a_request_that_returned_at_once(
    auditor, team, queue, s3_storage, settings, signing_key, tmp_path
):
    public = signing_key
    ServiceFactory(slug="kb-assistant", team=team)
    export = exports.request_export(actor=auditor, format="bundle", filters=AuditFilters())
    assert Export.objects.get(pk=export.pk).state == "queued"  # nothing built yet
    env = child_env(
        DATABASE_URL=database_url(connection.settings_dict),
        CELERY_TASK_DEFAULT_QUEUE=queue,
        AWS_STORAGE_BUCKET_NAME=settings.AWS_STORAGE_BUCKET_NAME,
        AWS_S3_ENDPOINT_URL=settings.AWS_S3_ENDPOINT_URL,
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        DATA_DIR=str(tmp_path / "worker"),
    )

    with celery_worker(env, queue) as worker:
        wait_for(
            lambda: Export.objects.get(pk=export.pk).finished, "the worker to finish the export"
        )
    export.refresh_from_db()
    assert export.state == "ready", (export.error, getattr(worker, "output", ""))
    assert export.progress == 100 and export.started_at is not None
    bundle = tmp_path / export.filename
    with export.file.open("rb") as stored:  # from the S3 bucket the worker wrote to
        bundle.write_bytes(stored.read())
    assert "records/releases.jsonl" in zipfile.ZipFile(bundle).namelist()
    key = tmp_path / "key.pem"
    key.write_bytes(public)
    result = subprocess.run(
        [sys.executable, str(VERIFIER), str(bundle), "--key", str(key)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    ready = Event.objects.get(action="export.ready")
    assert ready.payload_data["sha256"] == export.sha256


def test_a_delivery_is_retried_with_back_off_until_the_receiver_answers(sre, owner, world, queue):
    release = file_release(world, owner)
    env = child_env(
        DATABASE_URL=database_url(connection.settings_dict),
        CELERY_TASK_DEFAULT_QUEUE=queue,
        WEBHOOK_RETRY_BASE_SECONDS="1",
    )
    with receiving(script=[500, 502]) as receiver:
        subscription = webhooks.create_subscription(
            actor=sre, name="Change board bot", url=receiver.url, event_types=["release.submitted"]
        )
        services.submit_release(release, actor=owner)
        with celery_worker(env, queue):
            # The worker runs the dispatcher, which queues the delivery for it.
            assert tasks.dispatch_webhooks.apply_async(queue=queue).get(timeout=PATIENCE_S) == 1
            wait_for(
                lambda: Delivery.objects.filter(state="succeeded").exists(),
                "the third attempt to succeed",
            )

    delivery = Delivery.objects.get()
    assert (delivery.attempts, delivery.response_code) == (3, 200)
    first, second, third = receiver.received
    # Back-off: 1 s after the first failure, then 2 s.
    assert second.at - first.at >= 1.0
    assert third.at - second.at >= 2.0
    assert {r.headers["webhook-id"] for r in receiver.received} == {delivery.message_id}
    for request in receiver.received:
        body = Webhook(subscription.secret).verify(request.body, request.headers)
        assert body["data"]["service"] == world.service.slug
    subscription.refresh_from_db()
    assert subscription.failing_since is None and subscription.is_active
