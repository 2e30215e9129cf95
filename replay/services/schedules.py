"""Schedules: a sample set replayed against a backend on a crontab.

Each Schedule owns a django-celery-beat PeriodicTask (task ``replay_scheduled``,
kwargs ``{"schedule_id": …}``), so beat's database scheduler picks up changes made
here, in the admin or in the browser without a restart.
"""

from __future__ import annotations

import json
import logging

from celery.schedules import crontab as celery_crontab
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.translation import gettext as _
from django_celery_beat import validators
from django_celery_beat.models import CrontabSchedule, PeriodicTask

from ledger.chain import append_event
from lib.actors import Actor
from replay.models import Backend, Run, SampleSet, Schedule
from replay.permissions import ensure_can_manage_backend

logger = logging.getLogger(__name__)

TASK = "replay_scheduled"
_CRON_FIELDS = (
    ("minute", validators.minute_validator),
    ("hour", validators.hour_validator),
    ("day_of_month", validators.day_of_month_validator),
    ("month_of_year", validators.month_of_year_validator),
    ("day_of_week", validators.day_of_week_validator),
)


def parse_crontab(text: str) -> dict[str, str]:
    """'0 */6 * * *' -> the five CrontabSchedule fields; ValidationError naming the bad one."""
    parts = (text or "").split()
    if len(parts) != 5:
        raise ValidationError(
            {
                "crontab": _(
                    "Expected five fields: minute hour day-of-month month day-of-week, "
                    "e.g. '0 */6 * * *'; got %(count)d field(s) in %(text)s."
                )
                % {"count": len(parts), "text": repr(text)}
            }
        )
    fields = {}
    for index, ((name, validate), value) in enumerate(zip(_CRON_FIELDS, parts, strict=True)):
        try:
            validate(value)
            celery_crontab(**{name: value})
        except (ValidationError, ValueError) as error:
            message = error.messages[0] if isinstance(error, ValidationError) else str(error)
            label = name.replace("_", " ")
            raise ValidationError(
                {
                    "crontab": _(
                        "Field %(index)d (%(label)s) %(value)s is not valid: %(message)s. "
                        "Expected five fields: minute hour day-of-month month day-of-week, "
                        "e.g. '0 */6 * * *'."
                    )
                    % {"index": index + 1, "label": label, "value": repr(value), "message": message}
                }
            ) from None
        fields[name] = value
    return fields


def crontab_text(schedule: Schedule) -> str:
    cron = schedule.periodic_task.crontab
    if cron is None:
        return ""
    return " ".join(getattr(cron, name) for name, _ in _CRON_FIELDS)


def _crontab(text: str) -> CrontabSchedule:
    fields = parse_crontab(text)
    cron = CrontabSchedule.objects.filter(**fields, timezone=settings.TIME_ZONE).first()
    return cron or CrontabSchedule.objects.create(**fields, timezone=settings.TIME_ZONE)


def _service_id(backend: Backend) -> int:
    return backend.revision.service_id


def _view(schedule: Schedule) -> dict:
    return {
        "backend": schedule.backend.name,
        "sample_set_name": schedule.sample_set_name,
        "purpose": schedule.purpose,
        "crontab": crontab_text(schedule),
        "enabled": schedule.periodic_task.enabled,
    }


@transaction.atomic
def create_schedule(
    *,
    actor: Actor,
    backend: Backend,
    sample_set_name: str,
    crontab: str,
    purpose: str = Schedule.Purpose.REGULAR,
) -> Schedule:
    """Replay the latest version of a set against a backend on a 5-field crontab."""
    backend = Backend.objects.select_related("revision__service__team").get(pk=backend.pk)
    ensure_can_manage_backend(actor, backend.revision)
    cron = _crontab(crontab)
    if purpose not in Schedule.Purpose.values:
        raise ValidationError(
            {
                "purpose": _("Choose one of %(values)s.")
                % {"values": ", ".join(Schedule.Purpose.values)}
            }
        )
    if not SampleSet.objects.filter(name=sample_set_name).exists():
        raise ValidationError(
            {
                "sample_set_name": _("No sample set named %(name)s; import it first.")
                % {"name": repr(sample_set_name)}
            }
        )
    if Schedule.objects.filter(
        backend=backend, sample_set_name=sample_set_name, purpose=purpose
    ).exists():
        raise ValidationError(
            {
                "sample_set_name": _(
                    "%(name)s is already scheduled on %(backend)s for %(purpose)s; change that "
                    "schedule instead."
                )
                % {
                    "name": sample_set_name,
                    "backend": backend.name,
                    "purpose": Schedule.Purpose(purpose).label.lower(),
                }
            }
        )
    name = f"replay {sample_set_name} on {backend.name} ({purpose})"[:200]
    # A PeriodicTask left behind by a Schedule deleted around this verb would block the name.
    PeriodicTask.objects.filter(name=name, task=TASK, replay_schedule__isnull=True).delete()
    task = PeriodicTask.objects.create(
        name=name,
        task=TASK,
        crontab=cron,
        kwargs="{}",
        description=f"Replays the latest version of {sample_set_name} against {backend.name}.",
    )
    schedule = Schedule.objects.create(
        sample_set_name=sample_set_name, backend=backend, purpose=purpose, periodic_task=task
    )
    task.kwargs = json.dumps({"schedule_id": schedule.pk})
    task.save(update_fields=["kwargs"])
    append_event(
        actor=actor,
        action="replay.schedule_created",
        subject=schedule,
        service_id=_service_id(backend),
        payload={"after": _view(schedule)},
    )
    return schedule


@transaction.atomic
def update_schedule(
    schedule: Schedule, *, actor: Actor, crontab: str | None = None, enabled: bool | None = None
) -> bool:
    """Change the crontab or pause/resume; False (and no event) when nothing changed."""
    schedule = (
        Schedule.objects.select_for_update(of=("self",))
        .select_related("backend__revision__service__team", "periodic_task__crontab")
        .get(pk=schedule.pk)
    )
    ensure_can_manage_backend(actor, schedule.backend.revision)
    before = _view(schedule)
    task = schedule.periodic_task
    if crontab is not None:
        fields = parse_crontab(crontab)
        if " ".join(fields.values()) != before["crontab"]:
            task.crontab = _crontab(crontab)
    if enabled is not None:
        task.enabled = enabled
    after = _view(schedule)
    changed = [name for name in after if after[name] != before[name]]
    if not changed:
        return False
    task.save()
    append_event(
        actor=actor,
        action="replay.schedule_updated",
        subject=schedule,
        service_id=_service_id(schedule.backend),
        payload={
            "before": {name: before[name] for name in changed},
            "after": {name: after[name] for name in changed},
        },
    )
    return True


@transaction.atomic
def delete_schedule(schedule: Schedule, *, actor: Actor) -> None:
    schedule = Schedule.objects.select_related(
        "backend__revision__service__team", "periodic_task__crontab"
    ).get(pk=schedule.pk)
    ensure_can_manage_backend(actor, schedule.backend.revision)
    append_event(
        actor=actor,
        action="replay.schedule_deleted",
        subject=schedule,
        service_id=_service_id(schedule.backend),
        payload={"before": _view(schedule)},
    )
    # Deleting the PeriodicTask cascades to the Schedule and tells beat.
    schedule.periodic_task.delete()


def fire_schedule(schedule_id: int) -> Run | None:
    """What beat's ``replay_scheduled`` does: queue a run of the set's latest version.

    Idempotent: while a run of this set on this backend is still queued, running or
    interrupted, that run is returned and no other is queued (a redelivered message,
    or a crontab tighter than the run takes).
    """
    schedule = Schedule.objects.select_related("backend").filter(pk=schedule_id).first()
    if schedule is None:
        return None
    backend = schedule.backend
    if not backend.enabled:
        logger.info("schedule %s: %s is disabled; nothing queued", schedule_id, backend.name)
        return None
    sample_set = (
        SampleSet.objects.filter(name=schedule.sample_set_name).order_by("-version").first()
    )
    if sample_set is None:
        logger.warning("schedule %s: no sample set %r", schedule_id, schedule.sample_set_name)
        return None
    trigger = (
        Run.Trigger.VERIFICATION
        if schedule.purpose == Schedule.Purpose.ROLLBACK_VERIFICATION
        else Run.Trigger.SCHEDULE
    )
    from replay.services.runs import start_run

    with transaction.atomic():
        # The schedule's row lock serializes two deliveries of the same tick.
        if Schedule.objects.select_for_update().filter(pk=schedule_id).first() is None:
            return None
        in_flight = (
            Run.objects.select_for_update()
            .filter(
                backend=backend,
                sample_set__name=schedule.sample_set_name,
                trigger=trigger,
                state__in=[Run.State.QUEUED, Run.State.RUNNING, Run.State.INTERRUPTED],
            )
            .first()
        )
        if in_flight is not None:
            return in_flight
        return start_run(actor=None, backend=backend, sample_set=sample_set, trigger=trigger)
