"""Recording a rollback: the live revision set back to a target, the release it undoes
closed, the time it takes measured, and the target verified by a replay.

`record_rollback` starts it; it finishes when the target's verification replay ends
(`conclude_verification`, run by the `verify_rollback` task) or, where nothing can
verify it, when the SRE confirms how it went (`confirm_rollback`). A verification that
could not reach its backend (or could not run at all) says nothing about the target:
the rollback then awaits confirmation too, and `reverify_rollback` tries again. Its
duration, from start to finish, is compared with the minutes the plan expected.
"""

from __future__ import annotations

import datetime as dt

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from ledger import services as ledger_services
from ledger.chain import append_event
from ledger.models import ModelAsset, Revision, Service
from lib.actors import Actor
from lib.tasks import send_on_commit
from releases import permissions
from releases.governance import playbooks
from releases.governance.queries.plan import RollbackPlan, plan_for, plan_release
from releases.governance.queries.rolled_back import RolledBack
from releases.governance.services.base import lock_release
from releases.governance.services.drift import reconcile_open_changes
from releases.governance.services.errors import TransitionRefused
from releases.governance.services.readiness import (
    refresh_readiness_on_commit,
    verification_backend,
    verification_set,
)
from releases.governance.services.rollout import end_stage
from releases.models import Release, RollbackEvent, Stage
from releases.transitions import TRANSITIONS, Action
from replay import services as replay_services
from replay.models import Run


def _target(service: Service, plan: RollbackPlan, chosen: Revision | int | None) -> Revision:
    if chosen is not None:
        pk = chosen.pk if isinstance(chosen, Revision) else chosen
        target = Revision.objects.select_related("model_asset", "runtime").filter(pk=pk).first()
        if target is None or target.service_id != service.pk:
            raise ValidationError(
                {"target_revision": f"Revision {pk} is not a revision of {service.slug}."}
            )
    else:
        target = plan.target
        if target is None and plan.passed_over is not None:
            raise ValidationError(
                {
                    "target_revision": f"There is no default target: "
                    f"{plan.passed_over.sentence(service.slug)}, and no release has put it "
                    f"live since; no other earlier revision of {service.slug} has served. "
                    "Name the revision to go back to."
                }
            )
        if target is None:
            raise ValidationError(
                {
                    "target_revision": f"There is nothing to roll back to: no rollback plan "
                    f"names a target and no earlier revision of {service.slug} has served. "
                    "Name the revision to go back to."
                }
            )
    if target.model_asset.lifecycle == ModelAsset.Lifecycle.RETIRED:
        raise ValidationError(
            {"target_revision": f"{target.label}'s model asset {target.model_asset} is retired."}
        )
    if target.pk == service.live_revision_id and not plan.in_flight:
        raise ValidationError(
            {"target_revision": f"{target.label} is already live on {service.slug}."}
        )
    return target


def _confirmed_rolled_back(
    service: Service, target: Revision, rolled_back: RolledBack | None, confirmed: bool, why: str
) -> dict[str, object] | None:
    """Going back to a revision rolled back off the service takes a confirmation and a
    reason; what the rollback's Event records of it (None: the target was not)."""
    if rolled_back is None:
        return None
    errors = {}
    if not confirmed:
        errors["confirm_rolled_back"] = (
            f"{rolled_back.sentence(service.slug)}. Confirm that you go back to it anyway."
        )
    if not why.strip():
        errors["rolled_back_reason"] = (
            f"Say why you go back to {target.label} although it was rolled back: it goes in "
            "the ledger."
        )
    if errors:
        raise ValidationError(errors)
    return {
        "rollback": rolled_back.rollback_id,
        "rolled_back_at": rolled_back.at,
        "confirmed_because": why.strip(),
    }


def _clean_cache_answer(field: str, answer: str) -> str:
    if answer not in RollbackEvent.CacheAnswer.values:
        expected = ", ".join(v for v in RollbackEvent.CacheAnswer.values if v)
        raise ValidationError(
            {field: f"{answer!r} is not an answer; expected one of {expected}, or blank."}
        )
    return answer


def _clean_symptom(symptom: str) -> str:
    if symptom and symptom not in playbooks.FAILURE_MODES:
        raise ValidationError(
            {
                "symptom": f"{symptom!r} is not a failure mode; expected one of "
                f"{', '.join(playbooks.FAILURE_MODES)}, or none."
            }
        )
    return symptom


@transaction.atomic
def record_rollback(
    service: Service,
    *,
    actor: Actor,
    reason: str,
    symptom: str = "",
    target_revision: Revision | int | None = None,
    confirm_rolled_back: bool = False,
    rolled_back_reason: str = "",
    prefix_cache: str = "",
    response_cache: str = "",
) -> RollbackEvent:
    """Set the live revision back to the target (the plan's, or `target_revision`), end
    the rollout or release it undoes, and queue the target's verification replay.

    A target rolled back off the service (and not released since) is never the default;
    choosing it takes `confirm_rolled_back` and a `rolled_back_reason`. Whether the
    prefix and response caches were flushed may be answered now or later
    (`answer_rollback_caches`)."""
    # The release first, then the service: the order promote takes them in.
    seen = plan_release(service)
    release = lock_release(seen) if seen is not None else None
    service = (
        Service.objects.select_for_update(of=("self",))
        .select_related("team", "live_revision")
        .get(pk=service.pk)
    )
    permissions.ensure_can_record_rollback(actor, service)
    if release is not None and seen is not None and release.state != seen.state:
        raise TransitionRefused(
            f"Release #{release.pk} became {release.get_state_display().lower()} while you "
            "decided: reload the page and decide again.",
            state=release.state,
        )
    if not reason.strip():
        raise ValidationError({"reason": "Say why you roll back: it goes in the ledger."})
    symptom = _clean_symptom(symptom)
    prefix_cache = _clean_cache_answer("prefix_cache", prefix_cache)
    response_cache = _clean_cache_answer("response_cache", response_cache)
    plan = plan_for(service, release)
    target = _target(service, plan, target_revision)
    anyway = _confirmed_rolled_back(
        service, target, plan.rolled_back.get(target.pk), confirm_rolled_back, rolled_back_reason
    )
    now = timezone.now()
    rollback = RollbackEvent.objects.create(
        service=service,
        release=release,
        from_revision=service.live_revision,
        to_revision=target,
        kind=plan.kind,
        reason=reason.strip(),
        symptom=symptom,
        recorded_by=actor,
        started_at=now,
        expected_minutes=plan.expected_minutes,
        state=RollbackEvent.State.AWAITING_CONFIRMATION,
        prefix_cache=prefix_cache,
        response_cache=response_cache,
    )
    ledger_services.set_live_revision(
        service,
        target,
        actor=actor,
        reason=f"rollback #{rollback.pk}: {reason.strip()}",
        cause={"rollback": rollback.pk},
    )
    if release is not None:
        _close(release, actor=actor, rollback=rollback, now=now)
    reconcile_open_changes(
        service, actor=actor, how=f"rollback #{rollback.pk} set {target.label} live"
    )
    run = _queue_verification(rollback, plan, target)
    append_event(
        actor=actor,
        action="rollback.recorded",
        subject=rollback,
        subject_label=f"rollback #{rollback.pk} of {service.slug}",
        payload={
            "release": release.pk if release else None,
            "from_revision": rollback.from_revision_id,
            "to_revision": target.pk,
            "kind": plan.kind,
            "reason": rollback.reason,
            "symptom": symptom,
            "expected_minutes": plan.expected_minutes,
            "verification_run": run.pk if run else None,
            "prefix_cache": prefix_cache,
            "response_cache": response_cache,
            **({"target_rolled_back": anyway} if anyway else {}),
            **(
                {"passed_over": {"revision": passed.revision_id, "rollback": passed.rollback_id}}
                if (passed := plan.passed_over) is not None and target_revision is None
                else {}
            ),
        },
    )
    refresh_readiness_on_commit(service.pk)
    return rollback


def _close(release: Release, *, actor: Actor, rollback: RollbackEvent, now: dt.datetime) -> None:
    """Before 100 % the rollout is aborted; after, the release is rolled back."""
    # `plan_release` gives a rolling out or a released one: the table has one end for each.
    (after,) = TRANSITIONS[Action.ROLL_BACK].results(release.state, release.path)
    rolling_out = release.state == Release.State.ROLLING_OUT
    if rolling_out:
        end_stage(release, actor=actor, state=Stage.State.ROLLED_BACK, now=now)
    release.state = after
    release.closed_at = now
    release.close_code = Release.CloseCode.ROLLED_BACK
    release.save(update_fields=["state", "closed_at", "close_code", "updated_at"])
    append_event(
        actor=actor,
        action="release.aborted" if rolling_out else "release.rolled_back",
        subject=release,
        payload={"rollback": rollback.pk, "reason": rollback.reason},
    )


def _queue_verification(
    rollback: RollbackEvent, plan: RollbackPlan, target: Revision
) -> Run | None:
    backend = verification_backend(target)
    sample_set = verification_set(plan.verification_set, target)
    problem = ""
    if backend is None:
        problem = f"no enabled backend serves {target.label}"
    elif sample_set is None:
        problem = "no verification sample set is named by the plan or used before"
    else:
        try:
            run = replay_services.start_run(
                actor=None,
                backend=backend,
                sample_set=sample_set,
                trigger=Run.Trigger.VERIFICATION,
                enqueue=False,
            )
        except ValidationError as refused:
            problem = "; ".join(refused.messages)
    if problem:
        rollback.outcome_note = (
            f"Not verified automatically: {problem}. Confirm how the rollback went."
        )
        rollback.save(update_fields=["outcome_note"])
        return None
    rollback.verification_run = run
    rollback.state = RollbackEvent.State.VERIFYING
    rollback.save(update_fields=["verification_run", "state"])
    send_on_commit("verify_rollback", rollback.pk)
    return run


def _finish(
    rollback: RollbackEvent, *, actor: Actor, succeeded: bool, note: str, at: dt.datetime
) -> RollbackEvent:
    rollback.state = RollbackEvent.State.SUCCEEDED if succeeded else RollbackEvent.State.FAILED
    rollback.finished_at = max(at, rollback.started_at)
    rollback.outcome_note = note
    rollback.save(update_fields=["state", "finished_at", "outcome_note"])
    duration = rollback.finished_at - rollback.started_at
    append_event(
        actor=actor,
        action="rollback.finished",
        subject=rollback,
        subject_label=f"rollback #{rollback.pk} of {rollback.service.slug}",
        payload={
            "outcome": rollback.state,
            "note": note,
            "duration_seconds": round(duration.total_seconds(), 3),
            "expected_minutes": rollback.expected_minutes,
            "verification_run": rollback.verification_run_id,
        },
    )
    refresh_readiness_on_commit(rollback.service_id)
    return rollback


def _lock(rollback: RollbackEvent | int) -> RollbackEvent:
    pk = rollback.pk if isinstance(rollback, RollbackEvent) else rollback
    return (
        RollbackEvent.objects.select_for_update(of=("self",))
        .select_related("service__team", "verification_run__sample_set", "to_revision", "release")
        .get(pk=pk)
    )


@transaction.atomic
def conclude_verification(rollback: RollbackEvent | int) -> RollbackEvent:
    """Finish a verifying rollback from its replay's verdict (the system's verb; nothing
    happens while the run is not finished, or once the rollback is)."""
    rollback = _lock(rollback)
    run = rollback.verification_run
    if rollback.state != RollbackEvent.State.VERIFYING or run is None:
        return rollback
    if run.state not in (Run.State.FINISHED, Run.State.FAILED):
        return rollback
    if run.state == Run.State.FAILED or run.verdict == Run.Verdict.ERRORED:
        return _unknown(rollback, run)
    passed = run.verdict == Run.Verdict.PASSED
    note = f"verification run #{run.pk} ({run.sample_set}) {run.verdict}"
    return _finish(
        rollback, actor=None, succeeded=passed, note=note, at=run.finished_at or timezone.now()
    )


def _unknown(rollback: RollbackEvent, run: Run) -> RollbackEvent:
    """The verification reached no backend, or could not run: no verdict on the target,
    so the rollback awaits a person's confirmation (or another verification)."""
    why = (
        "could not reach its backend"
        if run.state == Run.State.FINISHED
        else f"could not run ({(run.summary or {}).get('error') or 'no reason recorded'})"
    )
    rollback.state = RollbackEvent.State.AWAITING_CONFIRMATION
    rollback.outcome_note = (
        f"Verification run #{run.pk} {why}: that says nothing about "
        f"{rollback.to_revision.label}. Confirm how the rollback went, or verify again."
    )
    rollback.save(update_fields=["state", "outcome_note"])
    append_event(
        actor=None,
        action="rollback.verification_unknown",
        subject=rollback,
        subject_label=f"rollback #{rollback.pk} of {rollback.service.slug}",
        payload={"verification_run": run.pk, "run_state": run.state, "verdict": run.verdict},
    )
    refresh_readiness_on_commit(rollback.service_id)
    return rollback


@transaction.atomic
def reverify_rollback(rollback: RollbackEvent, *, actor: Actor) -> RollbackEvent:
    """Verify again a rollback that awaits confirmation: queue its target's verification
    replay (the set of its last one, or the plan's) and wait for the verdict again."""
    rollback = _lock(rollback)
    permissions.ensure_can_verify_rollback_target(actor, rollback.service)
    if rollback.state != RollbackEvent.State.AWAITING_CONFIRMATION:
        raise ValidationError(
            {
                "rollback": f"Rollback #{rollback.pk} is "
                f"{rollback.get_state_display().lower()}: only one awaiting confirmation is "
                "verified again."
            }
        )
    target = rollback.to_revision
    before = rollback.verification_run
    plan_set = rollback.release.rollback_verification_set if rollback.release else ""
    backend = verification_backend(target)
    sample_set = verification_set(before.sample_set.name if before else plan_set, target)
    if backend is None or sample_set is None:
        missing = (
            f"no enabled backend serves {target.label}"
            if backend is None
            else "no verification sample set is named by the plan or used before"
        )
        raise ValidationError(
            {"rollback": f"Nothing can verify rollback #{rollback.pk}: {missing}."}
        )
    run = replay_services.start_run(
        actor=actor,
        backend=backend,
        sample_set=sample_set,
        trigger=Run.Trigger.VERIFICATION,
        enqueue=False,
    )
    rollback.verification_run = run
    rollback.state = RollbackEvent.State.VERIFYING
    rollback.save(update_fields=["verification_run", "state"])
    append_event(
        actor=actor,
        action="rollback.verification_retried",
        subject=rollback,
        subject_label=f"rollback #{rollback.pk} of {rollback.service.slug}",
        payload={"verification_run": run.pk, "previous_run": before.pk if before else None},
    )
    send_on_commit("verify_rollback", rollback.pk)
    return rollback


@transaction.atomic
def confirm_rollback(
    rollback: RollbackEvent, *, actor: Actor, succeeded: bool, note: str
) -> RollbackEvent:
    """The SRE says how a rollback went that no replay could verify."""
    rollback = _lock(rollback)
    permissions.ensure_can_record_rollback(actor, rollback.service)
    if rollback.state != RollbackEvent.State.AWAITING_CONFIRMATION:
        raise ValidationError(
            {
                "succeeded": f"Rollback #{rollback.pk} is {rollback.get_state_display().lower()}: "
                "only one awaiting confirmation is confirmed by hand."
            }
        )
    if not note.strip():
        raise ValidationError({"note": "Say what you checked, e.g. error rate back under 1 %."})
    return _finish(rollback, actor=actor, succeeded=succeeded, note=note.strip(), at=timezone.now())


@transaction.atomic
def answer_rollback_caches(
    rollback: RollbackEvent,
    *,
    actor: Actor,
    prefix_cache: str = "",
    response_cache: str = "",
) -> RollbackEvent:
    """Say, after the rollback was recorded, whether the engine's prefix cache and the
    gateway's response cache were flushed. A blank answer leaves that cache's answer as
    it is; an answer may be corrected, each change an Event."""
    rollback = _lock(rollback)
    permissions.ensure_can_record_rollback(actor, rollback.service)
    given = {
        "prefix_cache": _clean_cache_answer("prefix_cache", prefix_cache),
        "response_cache": _clean_cache_answer("response_cache", response_cache),
    }
    changed = {
        field: {"before": getattr(rollback, field), "after": answer}
        for field, answer in given.items()
        if answer and answer != getattr(rollback, field)
    }
    if not changed:
        raise ValidationError(
            {
                "prefix_cache": f"Nothing to record: rollback #{rollback.pk}'s answers are "
                "already these. Pick flushed, not flushed or not in use for a cache."
            }
        )
    for field, change in changed.items():
        setattr(rollback, field, change["after"])
    rollback.save(update_fields=list(changed))
    append_event(
        actor=actor,
        action="rollback.caches_answered",
        subject=rollback,
        subject_label=f"rollback #{rollback.pk} of {rollback.service.slug}",
        payload={
            "prefix_cache": rollback.prefix_cache,
            "response_cache": rollback.response_cache,
            "changed": changed,
        },
    )
    refresh_readiness_on_commit(rollback.service_id)
    return rollback
