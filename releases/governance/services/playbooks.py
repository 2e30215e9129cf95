"""A service's own playbooks and degradation policies, over the tier's defaults
(`releases.governance.playbooks`), kept in its Runbook row. Each change is an Event with what it
was before; clearing an entry brings the default back."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from ledger.chain import append_event
from ledger.models import Service, TaskType
from lib.actors import Actor
from releases import permissions
from releases.governance import playbooks
from releases.models import Runbook

MAX_STEPS = 20
MAX_STEP_LENGTH = 500
MAX_HOW_LENGTH = 300


def steps(name: str, given: Any) -> list[str]:
    """Ordered steps from a list or from text with one step a line."""
    lines = given.splitlines() if isinstance(given, str) else given
    if not isinstance(lines, list | tuple):
        raise ValidationError({name: "Expected the steps in order, one a line."})
    found = [str(line).strip() for line in lines if str(line).strip()]
    if not found:
        raise ValidationError({name: "Give at least one step, or go back to the default."})
    if len(found) > MAX_STEPS:
        raise ValidationError({name: f"At most {MAX_STEPS} steps; got {len(found)}."})
    for number, step in enumerate(found, start=1):
        if len(step) > MAX_STEP_LENGTH:
            raise ValidationError(
                {name: f"Step {number} has {len(step)} characters; at most {MAX_STEP_LENGTH}."}
            )
    return found


def _mode(mode: str) -> str:
    if mode not in playbooks.FAILURE_MODES:
        raise ValidationError(
            {
                "mode": f"{mode!r} is not a failure mode; expected one of "
                f"{', '.join(playbooks.FAILURE_MODES)}."
            }
        )
    return mode


def _runbook(service: Service) -> Runbook:
    runbook = Runbook.objects.select_for_update().filter(service=service).first()
    return runbook or Runbook(service=service, updated_at=timezone.now())


def _save(runbook: Runbook, *, actor: Actor, action: str, service: Service, payload: dict) -> None:
    runbook.updated_by, runbook.updated_at = actor, timezone.now()
    runbook.save()
    append_event(actor=actor, action=action, subject=service, payload=payload)


@transaction.atomic
def set_playbook(
    service: Service, *, actor: Actor, mode: str, diagnosis: Any, recovery: Any
) -> Runbook:
    """The service's own diagnosis steps and recovery actions for one failure mode."""
    permissions.ensure_can_edit_playbooks(actor, service)
    mode = _mode(mode)
    after = {"diagnosis": steps("diagnosis", diagnosis), "recovery": steps("recovery", recovery)}
    runbook = _runbook(service)
    before = runbook.playbooks.get(mode)
    if before == after:
        return runbook
    runbook.playbooks = {**runbook.playbooks, mode: after}
    payload = {"mode": mode, "before": before, "after": after}
    _save(runbook, actor=actor, action="service.playbook_changed", service=service, payload=payload)
    return runbook


@transaction.atomic
def clear_playbook(service: Service, *, actor: Actor, mode: str) -> bool:
    """Back to the tier's default for one failure mode; False when it already was."""
    permissions.ensure_can_edit_playbooks(actor, service)
    mode = _mode(mode)
    runbook = _runbook(service)
    if mode not in runbook.playbooks:
        return False
    before = runbook.playbooks[mode]
    runbook.playbooks = {k: v for k, v in runbook.playbooks.items() if k != mode}
    payload = {"mode": mode, "before": before, "after": None}
    _save(runbook, actor=actor, action="service.playbook_changed", service=service, payload=payload)
    return True


def _task_type(task_type: str) -> str:
    if not TaskType.objects.filter(slug=task_type).exists():
        raise ValidationError({"task_type": f"No task type {task_type!r}."})
    return task_type


@transaction.atomic
def set_degradation(
    service: Service, *, actor: Actor, task_type: str, may_degrade: bool, how: str
) -> Runbook:
    """What one task type of the service may do when it degrades, and how."""
    permissions.ensure_can_edit_playbooks(actor, service)
    task_type = _task_type(task_type)
    how = how.strip()
    if not how:
        raise ValidationError(
            {"how": "Say how it degrades, or how it stops (e.g. stops with an explainable error)."}
        )
    if len(how) > MAX_HOW_LENGTH:
        raise ValidationError({"how": f"At most {MAX_HOW_LENGTH} characters; got {len(how)}."})
    after = {"may_degrade": bool(may_degrade), "how": how}
    runbook = _runbook(service)
    before = runbook.degradation.get(task_type)
    if before == after:
        return runbook
    runbook.degradation = {**runbook.degradation, task_type: after}
    payload = {"task_type": task_type, "before": before, "after": after}
    _save(
        runbook, actor=actor, action="service.degradation_changed", service=service, payload=payload
    )
    return runbook


@transaction.atomic
def clear_degradation(service: Service, *, actor: Actor, task_type: str) -> bool:
    permissions.ensure_can_edit_playbooks(actor, service)
    runbook = _runbook(service)
    if task_type not in runbook.degradation:
        return False
    before = runbook.degradation[task_type]
    runbook.degradation = {k: v for k, v in runbook.degradation.items() if k != task_type}
    payload = {"task_type": task_type, "before": before, "after": None}
    _save(
        runbook, actor=actor, action="service.degradation_changed", service=service, payload=payload
    )
    return True
