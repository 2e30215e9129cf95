"""Task bodies called in this process: early returns, the probe sweep, the beat entries."""

from __future__ import annotations

import datetime as dt

import pytest
from celery.schedules import crontab
from django.conf import settings
from django.utils import timezone

from config.celery import app
from replay import services, tasks
from replay.models import Probe
from tests.replay.helpers import backend_on, make_set, sample

pytestmark = pytest.mark.django_db


def test_the_tasks_are_registered_under_their_public_names():
    app.loader.import_default_modules()

    assert {
        "run_replay",
        "replay_scheduled",
        "reap_stale_runs",
        "probe_backends",
        "probe_backend",
        "scrape_metrics",
        "scrape_backend_metrics",
        "purge_expired_outputs",
        "purge_expired_request_data",
    } <= set(app.tasks)
    assert tasks.run_replay.acks_late is True


def test_beat_runs_the_reaper_and_the_probe_sweep():
    schedule = {
        entry["task"]: entry["schedule"] for entry in settings.CELERY_BEAT_SCHEDULE.values()
    }

    assert schedule == {
        "reap_stale_runs": 60.0,
        "probe_backends": 1800.0,
        "checkpoint_ledger": 3600.0,
        # Daily, just after midnight: the first scrape of a day closes the day before.
        "scrape_metrics": crontab(minute=5, hour=0),
        # The same from the gateway's /metrics, by tenant, task type and backend.
        "scrape_gateway_metrics": crontab(minute=5, hour=0),
        # Retention sweeps, daily.
        "purge_expired_outputs": 86400.0,
        "purge_expired_request_data": 86400.0,
        "sweep_traces": 86400.0,
        # Yesterday's run evidence from the traces, once the day is over.
        "summarize_traces": crontab(minute=15, hour=0),
        # The releases app's: rollback readiness and due verifications, probes' drift
        # on live backends, and outbound webhooks.
        "sweep_rollback_readiness": 900.0,
        "record_unauthorized_changes": 300.0,
        # Is the gateway doing what the ledger renders? (GATEWAY_CHECK_EVERY_MINUTES)
        "check_gateway": 300.0,
        # The rollout analysis' tick (ANALYSIS_TICK_SECONDS); each stage at its interval.
        "run_analysis": 10.0,
        "dispatch_webhooks": 30.0,
        # Daily, after the night's run evidence is in.
        "raise_reviews": crontab(minute=30, hour=settings.REVIEWS_SWEEP_HOUR),
    }


def test_tasks_return_early_when_their_row_is_gone():
    assert tasks.run_replay(987654) is None
    assert tasks.replay_scheduled(987654) is None
    assert tasks.probe_backend(987654) is None


def test_run_replay_executes_the_run_and_a_second_delivery_does_nothing(fake):
    backend = backend_on(fake)
    sample_set = make_set("smoke", [sample("four", "fake: reply=4")])
    run = services.start_run(actor=None, backend=backend, sample_set=sample_set, enqueue=False)

    first = tasks.run_replay(run.pk)
    second = tasks.run_replay(run.pk)

    assert first == {"run": run.pk, "state": "finished", "verdict": "passed"}
    assert second == first
    assert len(fake.chat_requests) == 1


def test_the_probe_sweep_queues_enabled_backends_not_probed_lately(
    fake, django_capture_on_commit_callbacks
):
    fresh = backend_on(fake, name="fresh")
    stale = backend_on(fake, name="stale")
    backend_on(fake, name="disabled", enabled=False)
    Probe.objects.create(backend=fresh, fingerprint="x", started_at=timezone.now())
    Probe.objects.create(
        backend=stale, fingerprint="x", started_at=timezone.now() - dt.timedelta(hours=1)
    )

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        queued = tasks.probe_backends()

    assert queued == [stale.pk]
    assert len(callbacks) == 1


def test_the_probe_task_probes_without_recording_unchanged_capabilities(fake):
    backend = backend_on(fake)

    probe_id = tasks.probe_backend(backend.pk)

    assert Probe.objects.get(pk=probe_id).reachable is True
