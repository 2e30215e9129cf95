"""Schedules as django-celery-beat PeriodicTasks, kept through the domain."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django_celery_beat.models import PeriodicTask

from ledger.models import Event
from replay import services
from replay.models import Run, Schedule
from replay.services.schedules import crontab_text
from tests.replay.helpers import backend_on, make_set, sample

pytestmark = pytest.mark.django_db


@pytest.fixture
def backend(fake):
    backend = backend_on(fake)
    make_set("kb-smoke", [sample("four", "fake: reply=4")])
    return backend


def test_a_schedule_is_a_periodic_task_running_replay_scheduled(backend):
    schedule = services.create_schedule(
        actor=None, backend=backend, sample_set_name="kb-smoke", crontab="0 */6 * * 1-5"
    )

    task = schedule.periodic_task
    assert task.task == "replay_scheduled"
    assert json.loads(task.kwargs) == {"schedule_id": schedule.pk}
    assert task.enabled
    assert crontab_text(schedule) == "0 */6 * * 1-5"
    assert (task.crontab.minute, task.crontab.hour, task.crontab.day_of_week) == ("0", "*/6", "1-5")
    event = Event.objects.get(action="replay.schedule_created")
    assert event.service_id == backend.revision.service_id
    assert event.payload_data["after"]["crontab"] == "0 */6 * * 1-5"


@pytest.mark.parametrize(
    ("crontab", "message"),
    [
        ("0 6 * *", "Expected five fields: minute hour day-of-month month day-of-week"),
        ("0 25 * * *", "Field 2 (hour) '25' is not valid"),
        ("61 * * * *", "Field 1 (minute) '61' is not valid"),
        ("0 6 * * funday", "Field 5 (day of week) 'funday' is not valid"),
    ],
)
def test_a_bad_crontab_is_refused_naming_the_field(backend, crontab, message):
    with pytest.raises(ValidationError) as raised:
        services.create_schedule(
            actor=None, backend=backend, sample_set_name="kb-smoke", crontab=crontab
        )

    assert message in raised.value.message_dict["crontab"][0]
    assert not PeriodicTask.objects.filter(task="replay_scheduled").exists()


def test_an_unknown_set_and_a_duplicate_schedule_are_refused(backend):
    with pytest.raises(ValidationError) as raised:
        services.create_schedule(
            actor=None, backend=backend, sample_set_name="nope", crontab="0 * * * *"
        )
    assert "import it first" in raised.value.message_dict["sample_set_name"][0]

    services.create_schedule(
        actor=None, backend=backend, sample_set_name="kb-smoke", crontab="0 * * * *"
    )
    with pytest.raises(ValidationError):
        services.create_schedule(
            actor=None, backend=backend, sample_set_name="kb-smoke", crontab="5 * * * *"
        )
    rollback = services.create_schedule(
        actor=None,
        backend=backend,
        sample_set_name="kb-smoke",
        crontab="30 3 * * *",
        purpose=Schedule.Purpose.ROLLBACK_VERIFICATION,
    )
    assert rollback.purpose == "rollback_verification"


def test_update_changes_the_crontab_or_pauses_and_records_only_real_changes(backend):
    schedule = services.create_schedule(
        actor=None, backend=backend, sample_set_name="kb-smoke", crontab="0 * * * *"
    )

    assert services.update_schedule(schedule, actor=None, crontab="0  *  * * *") is False
    assert services.update_schedule(schedule, actor=None, crontab="15 2 * * *", enabled=False)

    schedule.refresh_from_db()
    schedule.periodic_task.refresh_from_db()
    assert crontab_text(schedule) == "15 2 * * *"
    assert schedule.periodic_task.enabled is False
    [event] = Event.objects.filter(action="replay.schedule_updated")
    assert event.payload_data["before"] == {"crontab": "0 * * * *", "enabled": True}
    assert event.payload_data["after"] == {"crontab": "15 2 * * *", "enabled": False}


def test_delete_removes_the_periodic_task_and_records_it(backend):
    schedule = services.create_schedule(
        actor=None, backend=backend, sample_set_name="kb-smoke", crontab="0 * * * *"
    )

    services.delete_schedule(schedule, actor=None)

    assert not Schedule.objects.exists()
    assert not PeriodicTask.objects.filter(task="replay_scheduled").exists()
    assert (
        Event.objects.get(action="replay.schedule_deleted").payload_data["before"]["backend"]
        == backend.name
    )


def test_only_the_owning_team_and_platform_sres_manage_schedules(backend, outsider, sre):
    with pytest.raises(PermissionDenied):
        services.create_schedule(
            actor=outsider, backend=backend, sample_set_name="kb-smoke", crontab="0 * * * *"
        )
    schedule = services.create_schedule(
        actor=sre, backend=backend, sample_set_name="kb-smoke", crontab="0 * * * *"
    )
    with pytest.raises(PermissionDenied):
        services.delete_schedule(schedule, actor=outsider)


def test_firing_queues_the_latest_version_once_while_a_run_is_in_flight(backend):
    schedule = services.create_schedule(
        actor=None, backend=backend, sample_set_name="kb-smoke", crontab="0 * * * *"
    )
    latest = make_set("kb-smoke", [sample("five", "fake: reply=5")])

    run = services.fire_schedule(schedule.pk)
    again = services.fire_schedule(schedule.pk)

    assert run == again
    assert (run.sample_set, run.trigger, run.state) == (latest, "schedule", "queued")
    assert Run.objects.count() == 1


def test_a_rollback_verification_schedule_queues_a_verification_run(backend):
    schedule = services.create_schedule(
        actor=None,
        backend=backend,
        sample_set_name="kb-smoke",
        crontab="30 3 * * *",
        purpose=Schedule.Purpose.ROLLBACK_VERIFICATION,
    )

    assert services.fire_schedule(schedule.pk).trigger == Run.Trigger.VERIFICATION


def test_firing_does_nothing_for_a_disabled_backend_or_a_deleted_schedule(backend):
    schedule = services.create_schedule(
        actor=None, backend=backend, sample_set_name="kb-smoke", crontab="0 * * * *"
    )
    services.update_backend(backend, actor=None, enabled=False)

    assert services.fire_schedule(schedule.pk) is None
    assert services.fire_schedule(schedule.pk + 1000) is None
    assert not Run.objects.exists()
