"""Keeping the catalog's rollback-readiness verdicts fresh, and the targets verified.

The incident screen and the service page judge readiness live
(`releases.governance.queries.plan.plan_readiness`); the catalog, which filters on it, reads a
stored ReadinessRecord. Every verb that changes what a rollback would do refreshes
its service's record after commit, and a periodic sweep refreshes all of them and
queues a verification replay of each target whose verification is due.

**Verify now** (`verify_rollback_target`, `verify_release_rollback_target`) queues it
at once, for whoever may replay against the service's backends: the only way, short
of waiting for the sweep, to clear a verification that could not reach its backend.
"""

from __future__ import annotations

import datetime as dt
import logging

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from ledger.chain import append_event
from ledger.models import Revision, Service
from lib.actors import Actor
from lib.tasks import send_on_commit
from releases import permissions, policy
from releases.governance.queries import plan as plans
from releases.governance.services.errors import TransitionRefused
from releases.models import ReadinessRecord, Release
from replay import queries as replay_queries
from replay import services as replay_services
from replay.models import Backend, Run, SampleSet

logger = logging.getLogger(__name__)

# A target is re-verified once its last verification is older than this share of its
# tier's limit, so it is fresh again before it goes stale.
REVERIFY_AT_SHARE = 0.5
# A verification that could not reach its backend says nothing about the target: it is
# tried again this soon, not after half the tier's limit.
REVERIFY_UNKNOWN_AFTER = dt.timedelta(hours=1)


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
    send_on_commit("refresh_service_readiness", service_id)


def verification_backend(target: Revision) -> Backend | None:
    return Backend.objects.filter(revision=target, enabled=True).order_by("name").first()


def verification_set(name: str, target: Revision) -> SampleSet | None:
    """The newest version of the plan's verification set; without one, the set of the
    target's last verification, else of the service's last verification of any revision."""
    if not name:
        last = replay_queries.last_verification(target)
        name = last.sample_set.name if last is not None else ""
    if not name:
        name = (
            Run.objects.filter(
                revision__service=target.service_id, trigger=Run.Trigger.VERIFICATION
            )
            .order_by("-created_at", "-pk")
            .values_list("sample_set__name", flat=True)
            .first()
        ) or ""
    if not name:
        return None
    return SampleSet.objects.filter(name=name).order_by("-version").first()


def _due(service: Service, plan: plans.RollbackPlan, now: dt.datetime) -> bool:
    target = plan.target
    if target is None or plan.in_flight:
        return False
    limit = dt.timedelta(days=policy.ROLLBACK_VERIFICATION_MAX_AGE_DAYS[service.tier])
    last = replay_queries.last_verification(target)
    if last is not None:
        wait = (
            REVERIFY_UNKNOWN_AFTER
            if last.verdict == Run.Verdict.ERRORED
            else limit * REVERIFY_AT_SHARE
        )
        if now - (last.finished_at or last.created_at) < wait:
            return False
    return replay_queries.pending_verification(target) is None


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
        run = replay_services.start_run(
            actor=None,
            backend=backend,
            sample_set=sample_set,
            trigger=Run.Trigger.VERIFICATION,
            enqueue=False,
        )
        _enqueue(run)
        return run


def _enqueue(run: Run) -> None:
    send_on_commit("verify_rollback_target", run.pk)


@transaction.atomic
def verify_rollback_target(service: Service, *, actor: Actor) -> Run:
    """Verify now: queue the verification replay of the rollback target of the plan in
    force (what the incident screen and the service page name), against an enabled
    backend serving it, with the plan's verification set (or the one used before)."""
    permissions.ensure_can_verify_rollback_target(actor, service)
    plan = plans.rollback_plan(service)
    return _queue_verification(
        service, plan.target, plan.verification_set, actor=actor, release=plan.release
    )


@transaction.atomic
def verify_release_rollback_target(release: Release, *, actor: Actor) -> Run:
    """Verify now, from a release's `rollback_plan` gate: the release's own target (the
    revision it names, or the one live when it was filed) with its verification set."""
    release = Release.objects.select_related(
        "service__team", "rollback_target", "from_revision"
    ).get(pk=release.pk)
    permissions.ensure_can_verify_rollback_target(actor, release.service)
    if release.state not in Release.OPEN_STATES:
        raise TransitionRefused(
            f"Release #{release.pk} is {release.get_state_display().lower()}: its rollback "
            "target is verified from the service's page now.",
            state=release.state,
        )
    target = release.rollback_target or release.from_revision
    return _queue_verification(
        release.service,
        target,
        release.rollback_verification_set,
        actor=actor,
        release=release,
    )


def _queue_verification(
    service: Service,
    target: Revision | None,
    set_name: str,
    *,
    actor: Actor,
    release: Release | None,
) -> Run:
    if target is None:
        raise ValidationError(
            {"target": f"{service.slug} has no rollback target to verify: name one first."}
        )
    # Two presses at once queue one run: the second waits here, then finds it queued.
    list(Revision.objects.select_for_update().filter(pk=target.pk).values_list("pk"))
    pending = replay_queries.pending_verification(target)
    if pending is not None:
        raise TransitionRefused(
            f"A verification of {target.label} is already queued: run #{pending.pk}.",
            state=pending.state,
        )
    backend = verification_backend(target)
    if backend is None:
        raise ValidationError(
            {
                "backend": f"Nothing can verify {target.label}: no enabled backend serves "
                f"{target.label}. Register one for it, or enable one, under Replay."
            }
        )
    sample_set = verification_set(set_name, target)
    if sample_set is None:
        raise ValidationError(
            {
                "sample_set": f"Nothing can verify {target.label}: the rollback plan names no "
                "verification set and none was used before."
            }
        )
    run = replay_services.start_run(
        actor=actor,
        backend=backend,
        sample_set=sample_set,
        trigger=Run.Trigger.VERIFICATION,
        enqueue=False,
    )
    append_event(
        actor=actor,
        action="rollback.verification_requested",
        subject=service,
        payload={
            "target": target.pk,
            "run": run.pk,
            "backend": backend.name,
            "sample_set": str(sample_set),
            "release": release.pk if release is not None else None,
        },
    )
    _enqueue(run)
    return run
