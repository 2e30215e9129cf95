"""The replay admin: every model visible, schedules edited only through the domain verbs."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from ledger.models import Event
from replay import services
from replay.models import Probe, Schedule
from tests.factories import UserFactory
from tests.replay.factories import SampleFactory
from tests.replay.helpers import finish, make_backend, run_with_results

MODELS = ["backend", "probe", "sampleset", "sample", "run", "result", "schedule"]
READ_ONLY = ["backend", "probe", "sampleset", "sample", "run", "result"]


@pytest.fixture
def admin_user(db):
    return UserFactory(username="root", is_superuser=True, is_staff=True)


@pytest.fixture
def replay_rows(team):
    """One of everything, so changelists and change pages render real rows."""
    backend = make_backend(team)
    run = finish(run_with_results(backend))
    Probe.objects.create(
        backend=backend,
        fingerprint=backend.revision.fingerprint,
        started_at=timezone.now(),
        reachable=True,
        drift=[{"what": "engine", "registered": "vllm", "reported": "sglang"}],
    )
    schedule = services.create_schedule(
        actor=None, backend=backend, sample_set_name=run.sample_set.name, crontab="0 3 * * *"
    )
    return backend, run, schedule


@pytest.mark.parametrize("model", MODELS)
def test_changelist_renders_for_a_superuser(client, admin_user, replay_rows, model):
    client.force_login(admin_user)

    response = client.get(f"/admin/replay/{model}/")

    assert response.status_code == 200


@pytest.mark.parametrize("model", MODELS)
def test_change_page_renders_for_a_superuser(client, admin_user, replay_rows, model):
    obj = apps.get_model("replay", model).objects.first()
    client.force_login(admin_user)

    response = client.get(f"/admin/replay/{model}/{obj.pk}/change/")

    assert response.status_code == 200


@pytest.mark.parametrize("model", READ_ONLY)
def test_read_only_models_say_changes_go_through_the_app(client, admin_user, replay_rows, model):
    obj = apps.get_model("replay", model).objects.first()
    client.force_login(admin_user)

    changelist = client.get(f"/admin/replay/{model}/").content.decode()
    change = client.get(f"/admin/replay/{model}/{obj.pk}/change/").content.decode()

    assert f"/admin/replay/{model}/add/" not in changelist
    assert "Replay changes go through the app" in change
    assert client.get(f"/admin/replay/{model}/add/").status_code == 403
    assert (
        client.post(f"/admin/replay/{model}/{obj.pk}/delete/", {"post": "yes"}).status_code == 403
    )
    assert apps.get_model("replay", model).objects.filter(pk=obj.pk).exists()


def test_changelists_select_related_rows_in_constant_queries(
    client, admin_user, team, django_assert_max_num_queries
):
    for n in range(3):
        backend = make_backend(team, name=f"b-{n}")
        finish(run_with_results(backend, passing=4))
    client.force_login(admin_user)

    for model in ("run", "result", "sample", "backend"):
        # session, user, counts, the page, and the filters' choices; never one per row
        with django_assert_max_num_queries(12):
            assert client.get(f"/admin/replay/{model}/").status_code == 200


def test_schedule_added_in_the_admin_goes_through_the_domain(client, admin_user, team):
    backend = make_backend(team)
    SampleFactory(sample_set__name="kb-smoke")
    client.force_login(admin_user)

    response = client.post(
        "/admin/replay/schedule/add/",
        {
            "backend": backend.pk,
            "sample_set_name": "kb-smoke",
            "purpose": "regular",
            "crontab": "*/30 * * * *",
            "enabled": "on",
        },
    )

    schedule = Schedule.objects.select_related("periodic_task__crontab").get()
    assert response.status_code == 302
    assert schedule.periodic_task.task == "replay_scheduled"
    assert schedule.periodic_task.crontab.minute == "*/30"
    assert Event.objects.filter(action="replay.schedule_created", actor=admin_user).exists()


def test_schedule_with_a_bad_crontab_is_refused_in_the_admin_form(client, admin_user, team):
    backend = make_backend(team)
    SampleFactory(sample_set__name="kb-smoke")
    client.force_login(admin_user)

    response = client.post(
        "/admin/replay/schedule/add/",
        {
            "backend": backend.pk,
            "sample_set_name": "kb-smoke",
            "purpose": "regular",
            "crontab": "every hour",
            "enabled": "on",
        },
    )

    assert response.status_code == 200
    assert "Expected five fields" in response.content.decode()
    assert not Schedule.objects.exists()


def test_schedule_changed_in_the_admin_goes_through_the_domain(client, admin_user, replay_rows):
    _, _, schedule = replay_rows
    client.force_login(admin_user)

    form = client.get(f"/admin/replay/schedule/{schedule.pk}/change/").content.decode()
    response = client.post(
        f"/admin/replay/schedule/{schedule.pk}/change/", {"crontab": "15 4 * * *"}
    )

    schedule.periodic_task.refresh_from_db()
    assert 'value="0 3 * * *"' in form
    assert "Saved through the replay domain" in form
    assert response.status_code == 302
    assert schedule.periodic_task.crontab.hour == "4"
    assert not schedule.periodic_task.enabled  # the box was left unticked
    assert Event.objects.filter(action="replay.schedule_updated", actor=admin_user).exists()


def test_schedule_deleted_in_the_admin_goes_through_the_domain(client, admin_user, replay_rows):
    _, _, schedule = replay_rows
    client.force_login(admin_user)

    response = client.post(f"/admin/replay/schedule/{schedule.pk}/delete/", {"post": "yes"})

    assert response.status_code == 302
    assert not Schedule.objects.exists()
    assert not PeriodicTask.objects.filter(task="replay_scheduled").exists()
    assert Event.objects.filter(action="replay.schedule_deleted", actor=admin_user).exists()


def test_schedules_deleted_in_bulk_each_go_through_the_domain(client, admin_user, replay_rows):
    _, _, schedule = replay_rows
    client.force_login(admin_user)

    response = client.post(
        "/admin/replay/schedule/",
        {"action": "delete_selected", "_selected_action": [schedule.pk], "post": "yes"},
    )

    assert response.status_code == 302
    assert not Schedule.objects.exists()
    assert Event.objects.filter(action="replay.schedule_deleted").count() == 1


def test_celery_beat_admin_stays_available(client, admin_user, replay_rows):
    client.force_login(admin_user)

    assert client.get("/admin/django_celery_beat/periodictask/").status_code == 200
    assert client.get("/admin/django_celery_beat/crontabschedule/").status_code == 200
