"""Daily run evidence scraped from backends' /metrics, through replay's guarded client.

The fake server on loopback serves the real-format vLLM fixtures at /metrics: the
first scrape of a day opens its window, the first of the next day closes it and
the ledger records the day; the beat's sweep runs in a real Celery worker.
"""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from django.db import connection
from django.utils import timezone

from config.celery import app
from ledger import services as ledger_services
from ledger.models import Event, RunSummary
from replay import services, tasks
from replay.models import MetricsScrape
from tests.ledger.factories import RevisionFactory
from tests.ledger.run_evidence.conftest import scrape_text
from tests.replay.helpers import backend_on
from tests.replay.test_tasks import wait_for
from tests.support.processes import celery_worker, child_env, database_url

BEFORE, AFTER = scrape_text("vllm_before.txt"), scrape_text("vllm_after.txt")


def _live_backend(fake, **fields):
    revision = RevisionFactory()
    ledger_services.set_live_revision(revision.service, revision, actor=None, reason="test")
    return backend_on(fake, revision=revision, **fields)


def _yesterday_at(hour: int) -> dt.datetime:
    midnight = timezone.now().astimezone(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return midnight - dt.timedelta(days=1) + dt.timedelta(hours=hour)


@pytest.mark.django_db
def test_the_first_scrape_of_the_next_day_records_the_day_before(fake):
    backend = _live_backend(fake)
    fake.configure(metrics=BEFORE)
    opened = services.scrape_backend(backend, now=_yesterday_at(0))
    fake.configure(metrics=AFTER)
    later_that_day = services.scrape_backend(backend, now=_yesterday_at(15))

    closed = services.scrape_backend(backend)

    assert (opened.status, later_that_day.status, closed.status) == ("opened", "kept", "recorded")
    summary = RunSummary.objects.get()
    assert summary.date == _yesterday_at(0).date()
    assert (summary.source, summary.revision_id) == ("scrape", backend.revision_id)
    assert summary.requests == 1010 and summary.ttft_p99_ms == 750.0
    assert summary.details["window"]["backend"] == backend.name
    assert summary.details["window"]["start"] == _yesterday_at(0).isoformat()
    # The day's first scrape was kept through the day; the new one opens today.
    assert MetricsScrape.objects.get().text == AFTER
    assert MetricsScrape.objects.get().taken_at.date() == timezone.now().date()
    assert [r.path for r in fake.requests] == ["/metrics"] * 3


@pytest.mark.django_db
def test_a_window_of_several_days_records_nothing(fake):
    backend = _live_backend(fake)
    fake.configure(metrics=BEFORE)
    services.scrape_backend(backend, now=_yesterday_at(0) - dt.timedelta(days=3))

    outcome = services.scrape_backend(backend)

    assert outcome.status == "gap"
    assert not RunSummary.objects.exists()
    assert MetricsScrape.objects.get().taken_at.date() == timezone.now().date()


@pytest.mark.django_db
def test_a_backend_not_serving_the_live_revision_records_nothing(fake):
    backend = backend_on(fake)  # its revision is not live
    fake.configure(metrics=BEFORE)
    services.scrape_backend(backend, now=_yesterday_at(0))

    assert services.scrape_backend(backend).status == "not_live"
    assert not RunSummary.objects.exists()


@pytest.mark.django_db
def test_an_endpoint_without_metrics_or_with_broken_text_fails_cleanly(fake):
    backend = _live_backend(fake)

    missing = services.scrape_backend(backend)  # the fake answers 404 without metrics
    fake.configure(metrics="vllm:num_requests_running{ 1\n")
    broken = services.scrape_backend(backend)

    assert missing.status == "failed" and "HTTP 404" in missing.detail
    assert broken.status == "failed" and "line 1" in broken.detail
    assert not MetricsScrape.objects.exists()


@pytest.mark.django_db
def test_a_backend_outside_the_allow_list_is_not_scraped(fake, settings):
    backend = _live_backend(fake)
    fake.configure(metrics=BEFORE)
    settings.REPLAY_ALLOWED_HOSTS = ["10.20.0.0/16"]

    outcome = services.scrape_backend(backend)

    assert outcome.status == "failed"
    assert "REPLAY_ALLOWED_HOSTS" in outcome.detail
    assert fake.requests == []


@pytest.mark.django_db
def test_the_sweep_queues_backends_of_known_engines_only(fake, django_capture_on_commit_callbacks):
    vllm = backend_on(fake, name="a-vllm")
    backend_on(fake, name="b-ollama", engine="ollama")
    backend_on(fake, name="c-disabled", enabled=False)

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        queued = tasks.scrape_metrics()

    assert queued == [vllm.pk]
    assert len(callbacks) == 1


@pytest.fixture
def queue():
    """A queue of this test's own, the default one of this process and of its worker, so the
    sweep's tasks land where the worker listens and nowhere else."""
    name = f"scrape-test-{uuid.uuid4().hex[:10]}"
    before = app.conf.task_default_queue
    app.conf.task_default_queue = name
    yield name
    app.conf.task_default_queue = before


@pytest.mark.django_db(transaction=True)
def test_the_daily_sweep_runs_in_a_real_worker_and_records_yesterday(fake, queue):
    backend = _live_backend(fake)
    fake.configure(metrics=BEFORE)
    services.scrape_backend(backend, now=_yesterday_at(0))  # what yesterday's sweep kept
    fake.configure(metrics=AFTER)
    env = child_env(
        DATABASE_URL=database_url(connection.settings_dict), CELERY_TASK_DEFAULT_QUEUE=queue
    )
    # Making the live backend re-routed its service, so the worker also records the
    # service's gateway config (gateway.config_changed): not the sweep's doing.
    sweep_events = Event.objects.exclude(action="gateway.config_changed")
    events_before = sweep_events.count()

    with celery_worker(env, queue=queue):
        # The beat's entry: the sweep queues one scrape per backend, which the worker runs.
        queued = tasks.scrape_metrics.apply_async(queue=queue).get(timeout=90)
        summary = wait_for(lambda: RunSummary.objects.first(), 90, "the scraped day")

    assert queued == [backend.pk]
    assert (summary.source, summary.date) == ("scrape", _yesterday_at(0).date())
    assert summary.ttft_p50_ms == pytest.approx(93.333, abs=0.001)
    assert summary.requests == 1010
    assert summary.recorded_by is None
    assert sweep_events.count() == events_before + 1
    assert sweep_events.latest("sequence").action == "run_summary.recorded"
    assert MetricsScrape.objects.get().text == AFTER
