import os
import uuid

from django.conf import settings
from django.db import connection

from config.celery import app
from ledger.tasks import probe_worker
from tests.support.processes import celery_worker, child_env, database_url


def test_a_task_runs_in_a_real_worker_process_over_redis(db):
    assert settings.CELERY_BROKER_URL.startswith("redis://")
    assert not app.conf.task_always_eager
    queue = f"test-{uuid.uuid4().hex[:12]}"
    env = child_env(DATABASE_URL=database_url(connection.settings_dict))

    with celery_worker(env, queue=queue):
        report = probe_worker.apply_async(queue=queue).get(timeout=60)

    assert report["pid"] != os.getpid()
    assert report["database_vendor"] == "postgresql"
    # The worker reached this test's own database, not the production one.
    assert report["database_name"] == connection.settings_dict["NAME"]
