"""The drill's verbs: plan it, record what its run measured, conclude it. Each writes its
rows and appends its Event in one transaction."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime
from django.utils.translation import gettext as _

from ledger.chain import append_event
from lib.actors import Actor
from releases import permissions
from releases.drills.plan import CleanPlan, PlanRefused, clean_plan
from releases.governance.services.calendar import create_blackout_window
from releases.governance.services.errors import TransitionRefused
from releases.models import Drill

HOUR = dt.timedelta(hours=1)


@transaction.atomic
def plan_drill(data: Any, *, actor: Actor) -> Drill:
    """Check the plan (PlanRefused names each fault) and record it as planned."""
    plan = clean_plan(data)
    permissions.ensure_can_plan_drill(actor, plan.services)
    drill = Drill.objects.create(
        name=plan.name,
        business_event=plan.business_event,
        window_starts_at=plan.window_starts_at,
        window_ends_at=plan.window_ends_at,
        revision=plan.revision,
        mix=plan.mix,
        arrival=plan.arrival,
        bounds=plan.bounds,
        capacity=plan.capacity,
        seed=plan.seed,
        in_flight_ceiling=plan.in_flight_ceiling,
        signers=plan.signers,
        created_by=actor,
    )
    drill.services.set(plan.services)
    append_event(
        actor=actor,
        action="drill.planned",
        subject=drill,
        payload=_plan_payload(drill, plan),
        service_id=plan.services[0].pk if len(plan.services) == 1 else None,
    )
    return drill


def _plan_payload(drill: Drill, plan: CleanPlan) -> dict[str, Any]:
    return {
        "name": drill.name,
        "business_event": drill.business_event,
        "window": [drill.window_starts_at, drill.window_ends_at],
        "services": [s.slug for s in plan.services],
        "revision": drill.revision_id,
        "mix": drill.mix,
        "arrival": drill.arrival,
        "bounds": drill.bounds,
        "capacity": drill.capacity,
        "seed": drill.seed,
        "in_flight_ceiling": drill.in_flight_ceiling,
        "signers": drill.signers,
    }


@transaction.atomic
def record_drill_results(drill: Drill, results: Mapping[str, Any], *, actor: Actor) -> Drill:
    """What a run measured: the drill becomes `ran` (a later run replaces the results)."""
    permissions.ensure_can_run_drill(actor)
    drill = Drill.objects.select_for_update().get(pk=drill.pk)
    if drill.state == Drill.State.CONCLUDED:
        raise TransitionRefused(
            _("Drill #%(id)s is concluded: its results are final.") % {"id": drill.pk},
            state=drill.state,
        )
    drill.results = dict(results)
    drill.state = Drill.State.RAN
    drill.ran_at = timezone.now()
    drill.save(update_fields=["results", "state", "ran_at"])
    append_event(
        actor=actor,
        action="drill.ran",
        subject=drill,
        payload={
            "seed": drill.seed,
            "achieved_rate": results.get("achieved_rate"),
            "requests": results.get("requests"),
            "late_starts": results.get("late_starts"),
            "dropped_starts": results.get("dropped_starts"),
            "workers": results.get("workers"),
            "verdicts": {
                task_type: row.get("verdict")
                for task_type, row in (results.get("by_task_type") or {}).items()
            },
        },
    )
    return drill


def _moment(value: Any) -> dt.datetime | None:
    if isinstance(value, dt.datetime):
        return value
    if isinstance(value, str) and value and "\x00" not in value:
        try:
            parsed = parse_datetime(value)
        except ValueError:
            return None
        if parsed is not None and parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=dt.UTC)
        return parsed
    return None


def _day(value: Any) -> dt.date | None:
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return value
    if isinstance(value, str) and value and "\x00" not in value:
        try:
            return parse_date(value)
        except ValueError:
            return None
    return None


def _task_types(value: Any, path: str, allowed: list[str], errors: dict) -> list[str]:
    if value in (None, ""):
        return []
    if not isinstance(value, list) or not all(v in allowed for v in value):
        errors[path] = _("expected a list of the drill's task types (%(allowed)s).") % {
            "allowed": ", ".join(allowed)
        }
        return []
    return sorted(set(value), key=allowed.index)


def temporary_cost(drill: Drill, until: dt.datetime | None) -> dict[str, Any] | None:
    """The scale-up's GPU-hours from the window's start to its reclaim, priced at the price
    sheet in force when it started (None without a scale-up or a window)."""
    from releases.cost.queries import Prices

    extra = int((drill.capacity or {}).get("extra_replicas") or 0)
    start = drill.window_starts_at
    if not extra or start is None or until is None or until <= start:
        return None
    gpus = 0
    gpu_model = ""
    for service in drill.services.select_related("live_revision__runtime"):
        runtime = service.live_revision.runtime if service.live_revision else None
        if runtime is not None:
            gpus += extra * max(runtime.gpu_count, 1)
            gpu_model = gpu_model or runtime.gpu_model
    hours = Decimal((until - start) / HOUR).quantize(Decimal("0.01"))
    gpu_hours = (hours * gpus).quantize(Decimal("0.01"))
    found: dict[str, Any] = {"gpu_hours": str(gpu_hours), "gpu_model": gpu_model}
    price = Prices([gpu_model]).in_force(gpu_model, start.date()) if gpu_model else None
    if price is not None:
        found["cost"] = str((gpu_hours * price[0]).quantize(Decimal("0.01")))
        found["currency"] = price[1]
    return found


@transaction.atomic
def conclude_drill(drill: Drill, answers: Mapping[str, Any], *, actor: Actor) -> Drill:
    """Conclude a drill that ran; every part must be answered (PlanRefused names the rest).

    `answers`: protected and degraded task types, whether the failure message was seen
    (when one degraded), the scale-up reclaimed (`reclaimed_at`, `reclaimed_by`) or an
    open action (`action_owner`, `action_due_on`), pools to pre-warm and throttles to set,
    and `blackout: true` to put the peak's window on the calendar.
    """
    drill = Drill.objects.select_for_update().get(pk=drill.pk)
    permissions.ensure_can_conclude_drill(actor, drill.signers)
    if drill.state != Drill.State.RAN:
        raise TransitionRefused(
            _("Drill #%(id)s is %(state)s: only a drill that ran can be concluded.")
            % {"id": drill.pk, "state": drill.get_state_display()},
            state=drill.state,
        )
    errors: dict[str, str] = {}
    task_types = [entry["task_type"] for entry in drill.mix]
    protected = _task_types(answers.get("protected"), "protected", task_types, errors)
    degraded = _task_types(answers.get("degraded"), "degraded", task_types, errors)
    if set(protected) & set(degraded):
        errors["degraded"] = _("a task type cannot be both protected and degraded.")
    elif not errors and set(protected) | set(degraded) != set(task_types):
        missing = [t for t in task_types if t not in protected and t not in degraded]
        errors["protected"] = _(
            "say of every task type whether it was protected or degraded: %(missing)s."
        ) % {"missing": ", ".join(missing)}
    seen = answers.get("failure_message_seen")
    if degraded and not isinstance(seen, bool):
        errors["failure_message_seen"] = _(
            "a task type degraded: say whether its users saw the failure message."
        )
    scale_up = bool(
        (drill.capacity or {}).get("extra_replicas") or (drill.capacity or {}).get("pool")
    )
    reclaimed_at = _moment(answers.get("reclaimed_at"))
    reclaimed_by = answers.get("reclaimed_by") or ""
    action_owner = answers.get("action_owner") or ""
    action_due = _day(answers.get("action_due_on"))
    users = get_user_model().objects
    if answers.get("reclaimed_at") and reclaimed_at is None:
        errors["reclaimed_at"] = _("expected a date and time such as 2026-12-31T18:00:00Z.")
    if reclaimed_by and not users.filter(username=reclaimed_by).exists():
        errors["reclaimed_by"] = _("no user %(name)s.") % {"name": repr(reclaimed_by)}
    if action_owner and not users.filter(username=action_owner, is_active=True).exists():
        errors["action_owner"] = _("no active user %(name)s.") % {"name": repr(action_owner)}
    if scale_up and not {"reclaimed_at", "reclaimed_by", "action_owner"} & errors.keys():
        if reclaimed_at is not None and not reclaimed_by:
            errors["reclaimed_by"] = _("say who reclaimed the scale-up.")
        elif reclaimed_at is None and not (action_owner and action_due):
            errors["reclaimed_at"] = _(
                "the scale-up must be reclaimed (when, by whom) or left as an open action "
                "with an owner and a due date."
            )
    throttles = answers.get("throttles", "")
    prewarm = answers.get("prewarm_pools", (drill.capacity or {}).get("prewarm_pools", []))
    if not isinstance(throttles, str) or "\x00" in throttles or len(throttles) > 2000:
        errors["throttles"] = _("expected text of at most 2000 characters.")
    if not isinstance(prewarm, list) or not all(
        isinstance(p, str) and len(p) <= 100 for p in prewarm
    ):
        errors["prewarm_pools"] = _("expected a list of pool names.")
    blackout = answers.get("blackout", False)
    if blackout and (drill.window_starts_at is None or drill.window_ends_at is None):
        errors["blackout"] = _("the drill has no window to put on the calendar.")
    if errors:
        raise PlanRefused(errors)

    cost = temporary_cost(drill, reclaimed_at or _moment((drill.capacity or {}).get("reclaim_by")))
    conclusion = {
        "protected": protected,
        "degraded": degraded,
        "failure_message_seen": seen if degraded else None,
        "reclaimed_at": reclaimed_at.isoformat() if reclaimed_at else None,
        "reclaimed_by": reclaimed_by,
        "open_action": (
            {"owner": action_owner, "due_on": action_due.isoformat()}
            if reclaimed_at is None and action_owner and action_due
            else None
        ),
        "temporary_cost": cost,
        "prewarm_pools": list(prewarm),
        "throttles": throttles.strip(),
        "blackout_windows": [],
    }
    if blackout and drill.window_starts_at and drill.window_ends_at:
        for service in drill.services.all():
            window = create_blackout_window(
                actor=actor,
                name=_("Peak: %(name)s") % {"name": drill.name},
                starts_at=drill.window_starts_at,
                ends_at=drill.window_ends_at,
                service=service,
                reason=_("Drill #%(id)s rehearsed this peak.") % {"id": drill.pk},
            )
            conclusion["blackout_windows"].append(window.pk)
    drill.conclusion = conclusion
    drill.state = Drill.State.CONCLUDED
    drill.concluded_at = timezone.now()
    drill.concluded_by = actor
    drill.save(update_fields=["conclusion", "state", "concluded_at", "concluded_by"])
    append_event(actor=actor, action="drill.concluded", subject=drill, payload=conclusion)
    return drill
