"""The daily review sweep run by a real Celery worker: the task beat schedules is sent by
its name to a worker process on a queue of its own, which raises the review of a service
whose latency drifted, with its numbers, and marks nothing twice when sent again.

The database is shared with the worker, so this test commits (``transaction=True``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import pytest
from django.conf import settings
from django.db import connection

from config.celery import app
from ledger.models import Event
from releases.models import Review
from tests.factories import UserFactory
from tests.ledger.factories import TeamFactory
from tests.releases.factories import build_world
from tests.releases.review_helpers import push_days
from tests.support.processes import celery_worker, child_env, database_url

pytestmark = pytest.mark.django_db(transaction=True)

PATIENCE_S = 300  # bounds a hang only


def wait_for(condition: Callable[[], object], what: str) -> object:
    deadline = time.monotonic() + PATIENCE_S
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {PATIENCE_S}s waiting for {what}")


def test_the_beat_task_raises_reviews_in_a_real_worker():
    sre = UserFactory(username="sam", roles=["platform_sre"])
    team = TeamFactory(slug="kb-team", members=[UserFactory(username="olivia")])
    world = build_world(team)
    push_days(world.service, [1000] * 7)
    beat = settings.CELERY_BEAT_SCHEDULE["raise-reviews"]
    queue = f"reviews-test-{uuid.uuid4().hex[:10]}"
    env = child_env(
        DATABASE_URL=database_url(connection.settings_dict), CELERY_TASK_DEFAULT_QUEUE=queue
    )

    with celery_worker(env, queue) as worker:
        first = app.send_task(beat["task"], queue=queue)
        review = wait_for(lambda: Review.objects.filter(service=world.service).first(), "a review")
        assert first.get(timeout=PATIENCE_S) == {
            "scanned": 1,
            "raised": 1,
            "added": 0,
            "overdue": 0,
        }
        again = app.send_task(beat["task"], queue=queue)
        assert again.get(timeout=PATIENCE_S)["raised"] == 0

    assert "raise_reviews" in worker.output
    assert review.assignee == sre
    trigger = review.triggers.get()
    assert (trigger.kind, trigger.numbers["ttft_p95_7d_ms"]) == ("latency_drift", 1000.0)
    assert Event.objects.filter(action="review.raised").count() == 1
