"""Keeping the catalog's rollback-readiness verdicts fresh, and the targets verified.

The incident screen and the service page judge readiness live
(`releases.queries.plan.plan_readiness`); the catalog, which filters on it, reads a
stored ReadinessRecord. Every verb that changes what a rollback would do refreshes
its service's record after commit, and a periodic sweep refreshes all of them and
queues a verification replay of each target whose verification is due.
"""

from __future__ import annotations

import datetime as dt
import logging

from django.db import transaction
from django.utils import timezone

from ledger.models import Revision, Service
from releases import policy
from releases.models import ReadinessRecord
from releases.queries import plan as plans
from replay import queries as replay_queries
from replay import services as replay_services
from replay.models import Backend, Run, SampleSet

logger = logging.getLogger(__name__)

# A target is re-verified once its last verification is older than this share of its
# tier's limit, so it is fresh again before it goes stale.
REVERIFY_AT_SHARE = 0.5


def _service(service_id: int) -> Service | None:
    return (
        Service.objects.select_related(
            "team", "live_revision__model_asset__license", "live_revision__runtime"
        )
        .filter(pk=service_id)
        .first()
    )


def refresh_readiness(service_id: int, *, now: dt.datetime | None = None) -> ReadinessRecord | None:
    """Judge the service's readiness now and store it (None: the service is gone)."""
    service = _service(service_id)
    if service is None:
        return None
    plan = plans.rollback_plan(service)
    readiness = plans.plan_readiness(service, plan, now=now)
    record, _ = ReadinessRecord.objects.update_or_create(
        service=service,
        defaults={
            "verdict": readiness.verdict,
            "reasons": [{"verdict": r.verdict, "text": r.text} for r in readiness.reasons],
            "target": readiness.target,
            "computed_at": now or timezone.now(),
        },
    )
    return record


def refresh_readiness_on_commit(service_id: int) -> None:
    from releases.tasks import refresh_service_readiness

    refresh_service_readiness.delay_on_commit(service_id)


def verification_backend(target: Revision) -> Backend | None:
    return Backend.objects.filter(revision=target, enabled=True).order_by("name").first()


def verification_set(name: str, target: Revision) -> SampleSet | None:
    """The newest version of the plan's verification set; without one, the set of the
    target's last verification."""
    if not name:
        last = replay_queries.last_verification(target)
        name = last.sample_set.name if last is not None else ""
    if not name:
        return None
    return SampleSet.objects.filter(name=name).order_by("-version").first()


def _due(service: Service, plan: plans.RollbackPlan, now: dt.datetime) -> bool:
    target = plan.target
    if target is None or plan.in_flight:
        return False
    limit = dt.timedelta(days=policy.ROLLBACK_VERIFICATION_MAX_AGE_DAYS[service.tier])
    last = replay_queries.last_verification(target)
    if last is not None and now - (last.finished_at or last.created_at) < limit * REVERIFY_AT_SHARE:
        return False
    pending = Run.objects.filter(
        revision=target,
        trigger=Run.Trigger.VERIFICATION,
        state__in=(Run.State.QUEUED, Run.State.RUNNING, Run.State.INTERRUPTED),
    )
    return not pending.exists()


def reverify_due_target(service: Service, *, now: dt.datetime | None = None) -> Run | None:
    """Queue the verification replay of the service's rollback target when it is due and
    something can run it (a backend serving the target, a verification set)."""
    now = now or timezone.now()
    plan = plans.rollback_plan(service)
    if not _due(service, plan, now):
        return None
    assert plan.target is not None
    backend = verification_backend(plan.target)
    sample_set = verification_set(plan.verification_set, plan.target)
    if backend is None or sample_set is None:
        logger.info(
            "readiness: %s's target %s is due for verification but has no %s",
            service.slug,
            plan.target.label,
            "backend" if backend is None else "verification set",
        )
        return None
    with transaction.atomic():
        return replay_services.start_run(
            actor=None, backend=backend, sample_set=sample_set, trigger=Run.Trigger.VERIFICATION
        )
