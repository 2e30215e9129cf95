"""Replay's Celery tasks. Their names are a public API (beat entries, PeriodicTasks).

Each takes ids, re-fetches, returns early when the row is gone, and calls a verb in
``replay.services``. All are idempotent, so ``acks_late`` is safe: ``run_replay``
claims its run with a conditional update and results are unique per (run, sample,
attempt); the periodic ones take a lock.
"""

from __future__ import annotations

import datetime as dt
import logging

from celery import shared_task
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from replay import services
from replay.models import Backend, Probe, Run
from replay.openloop import shards as shards_module
from replay.openloop.shards import DrillSpec
from replay.services import retention
from replay.services.common import try_singleton_lock

logger = logging.getLogger(__name__)


@shared_task(name="run_replay", acks_late=True)
def run_replay(run_id: int) -> dict[str, object] | None:
    """Execute (or resume) one run. A run already finished, or held by a live worker, is left alone."""
    if not Run.objects.filter(pk=run_id).exists():
        logger.info("run_replay: run %s is gone", run_id)
        return None
    run = services.execute_run(run_id)
    return {"run": run.pk, "state": run.state, "verdict": run.verdict}


@shared_task(name="run_open_loop_shard", acks_late=True)
def run_open_loop_shard(
    spec: DrillSpec, shard: int, shards: int, start_at: float
) -> dict[str, object]:
    """One shard of an open-loop plan (replay.openloop.shards), starting at ``start_at``.

    Not idempotent by design (it sends load), so it is never retried: a shard whose
    worker died is reported missing, or re-run once, by the caller that merges. Its
    message ``expires`` shortly after its start, so a redelivered one is dropped.
    """
    outcome = shards_module.run_shard(spec, shard, shards, start_at)
    if outcome["status"] == "ok":
        summary = outcome["result"]["rows"]
        logger.info("run_open_loop_shard: shard %s of %s, %d arrivals", shard, shards, len(summary))
    else:
        logger.warning("run_open_loop_shard: shard %s of %s: %s", shard, shards, outcome["reason"])
    return outcome


@shared_task(name="replay_scheduled", acks_late=True)
def replay_scheduled(schedule_id: int) -> int | None:
    """Beat's entry point for a Schedule: queue a run of the set's latest version."""
    run = services.fire_schedule(schedule_id)
    return run.pk if run is not None else None


@shared_task(name="reap_stale_runs", acks_late=True)
def reap_stale_runs() -> list[int]:
    """Periodic: interrupt runs whose worker died and queue them again to resume."""
    return services.reap_stale_runs()


@shared_task(name="probe_backend", acks_late=True)
def probe_backend(backend_id: int) -> int | None:
    backend = Backend.objects.filter(pk=backend_id, enabled=True).first()
    if backend is None:
        return None
    probe = services.probe_backend(backend, actor=None, record_unchanged=False)
    return probe.pk


@shared_task(name="probe_backends", acks_late=True)
def probe_backends() -> list[int]:
    """Periodic sweep: one ``probe_backend`` task per enabled backend not probed lately.

    One task per backend, so a slow backend does not hold up the others' probes.
    """
    recent = timezone.now() - dt.timedelta(minutes=settings.REPLAY_PROBE_EVERY_MINUTES / 2)
    queued: list[int] = []
    with transaction.atomic():
        if not try_singleton_lock("probe_backends"):
            return []
        fresh = Probe.objects.filter(started_at__gte=recent).values("backend_id")
        for backend_id in (
            Backend.objects.filter(enabled=True).exclude(pk__in=fresh).values_list("pk", flat=True)
        ):
            probe_backend.delay_on_commit(backend_id)
            queued.append(backend_id)
    return queued


@shared_task(name="purge_expired_outputs", acks_late=True)
def purge_expired_outputs() -> int:
    count = retention.purge_expired_outputs(actor=None)
    logger.info("redacted %d replay outputs past retention", count)
    return count


@shared_task(name="scrape_backend_metrics", acks_late=True)
def scrape_backend_metrics(backend_id: int) -> dict[str, object] | None:
    """Scrape one backend's /metrics; closes and records the day its stored scrape opened."""
    backend = Backend.objects.filter(pk=backend_id, enabled=True).first()
    if backend is None:
        logger.info("scrape_backend_metrics: backend %s is gone or disabled", backend_id)
        return None
    outcome = services.scrape_backend(backend)
    logger.info("scrape_backend_metrics: %s", outcome.to_json())
    return outcome.to_json()


@shared_task(name="scrape_metrics", acks_late=True)
def scrape_metrics() -> list[int]:
    """Daily, just after midnight UTC: one ``scrape_backend_metrics`` task per enabled backend
    of an engine whose metric names are known (one task each: a slow backend holds up
    no other)."""
    queued: list[int] = []
    with transaction.atomic():
        if not try_singleton_lock("scrape_metrics"):
            return []
        for backend_id in Backend.objects.filter(
            enabled=True, engine__in=services.SCRAPED_ENGINES
        ).values_list("pk", flat=True):
            scrape_backend_metrics.delay_on_commit(backend_id)
            queued.append(backend_id)
    return queued
