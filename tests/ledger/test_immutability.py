import threading
import time

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connection, connections, transaction

from ledger import locks, queries, services
from ledger.models import Event, ModelAsset, Revision, Service
from tests.ledger.factories import ModelAssetFactory, RevisionFactory, RuntimeFactory


@pytest.fixture
def live_revision(team):
    revision = RevisionFactory(service__team=team)
    services.set_live_revision(revision.service, revision, actor=None)
    revision.refresh_from_db()
    return revision


def test_a_revision_that_has_served_cannot_change(live_revision):
    with pytest.raises(ValidationError) as excinfo:
        services.update_revision(live_revision, actor=None, context_limit=16384)

    message = excinfo.value.message_dict["context_limit"][0]
    assert "has served live traffic" in message
    assert "Make a new revision instead" in message
    assert Revision.objects.get(pk=live_revision.pk).context_limit == 32768


def test_notes_of_a_served_revision_may_still_change(live_revision):
    assert services.update_revision(live_revision, actor=None, notes="rollback target since March")


def test_assets_and_runtimes_that_served_are_frozen_but_keep_their_lifecycle(live_revision):
    asset = live_revision.model_asset
    runtime = live_revision.runtime

    with pytest.raises(ValidationError, match="has served with it"):
        services.update_asset(asset, actor=None, weights_digest="sha256:" + "0" * 64)
    with pytest.raises(ValidationError, match="has served with it"):
        services.update_runtime(runtime, actor=None, engine_version="0.7.0")
    assert services.deprecate_asset(asset, actor=None)


def test_an_unlocked_revision_can_change_and_its_fingerprint_follows(team):
    revision = RevisionFactory(service__team=team)
    before = revision.fingerprint

    services.update_revision(revision, actor=None, context_limit=65536)

    revision.refresh_from_db()
    assert revision.context_limit == 65536
    assert revision.fingerprint != before


def test_new_revision_from_a_locked_one_copies_its_parts(live_revision):
    successor = services.new_revision_from(live_revision, actor=None, gateway_policy_version="gw-2")

    assert successor.number == live_revision.number + 1
    assert successor.based_on == live_revision
    assert successor.model_asset == live_revision.model_asset
    assert (
        successor.fingerprint == live_revision.fingerprint
    )  # gateway policy is not inference config
    assert list(queries.same_fingerprint(successor)) == [live_revision]
    assert successor.lock_reasons() == []


def test_other_apps_extend_the_lock_rule(team):
    revision = RevisionFactory(service__team=team)

    @locks.register
    def frozen_by_test(objs):
        return {obj.pk: ["held by a test release"] for obj in objs if obj == revision}

    try:
        with pytest.raises(ValidationError, match="held by a test release"):
            services.update_revision(revision, actor=None, context_limit=4096)
    finally:
        locks.unregister(frozen_by_test)


def test_fields_set_by_the_ledger_cannot_be_written_directly(team):
    revision = RevisionFactory(service__team=team)

    with pytest.raises(ValidationError) as excinfo:
        services.update_revision(revision, actor=None, fingerprint="sha256:" + "1" * 64)
    assert excinfo.value.message_dict == {
        "fingerprint": ["This field is set by the ledger itself."]
    }
    with pytest.raises(ValidationError):
        services.update_service(revision.service, actor=None, live_revision=revision)


def test_owners_of_another_team_cannot_change_an_asset(team, owner):
    from tests.factories import UserFactory
    from tests.ledger.factories import TeamFactory

    stranger = UserFactory(username="stranger", roles=["model_owner"])
    TeamFactory(slug="other-team", members=[stranger])
    asset = ModelAssetFactory(team=team)
    events_before = Event.objects.count()

    with pytest.raises(PermissionDenied, match="Only model owners of team 'kb-team'"):
        services.update_asset(asset, actor=stranger, family="llama")
    assert services.update_asset(asset, actor=owner, family="llama")
    assert Event.objects.count() == events_before + 1


def test_auditors_change_nothing(team, auditor):
    runtime = RuntimeFactory(team=team)

    with pytest.raises(PermissionDenied):
        services.update_runtime(runtime, actor=auditor, engine_version="9")


# ---------------------------------------------------------------- under concurrency


def _waiting_on_a_lock(pid: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid])
        row = cursor.fetchone()
    return row is not None and row[0] == "Lock"


def _run_in_thread(target):
    """Run `target` on its own connection; return (thread, its backend pid, outcome)."""
    pid_known = threading.Event()
    state: dict = {}

    def body():
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                state["pid"] = cursor.fetchone()[0]
            pid_known.set()
            state["result"] = target()
        except Exception as error:  # the outcome is what the test asserts
            state["error"] = error
        finally:
            pid_known.set()
            connections.close_all()

    thread = threading.Thread(target=body)
    thread.start()
    assert pid_known.wait(60)
    return thread, state


def _until(condition, *, what: str) -> None:
    """Wait for PostgreSQL to report a state; the loop ends on the event, the bound only
    on a hang."""
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, f"never saw: {what}"
        time.sleep(0.01)


@pytest.mark.django_db(transaction=True)
def test_an_update_waits_for_a_revision_going_live_and_is_then_refused(team):
    revision = RevisionFactory(service__team=team)
    asset = revision.model_asset
    with transaction.atomic():
        services.set_live_revision(revision.service, revision, actor=None)
        # Still uncommitted: the asset is not yet frozen for anyone else.
        thread, state = _run_in_thread(
            lambda: services.update_asset(
                ModelAsset.objects.get(pk=asset.pk), actor=None, family="qwen3"
            )
        )
        _until(lambda: _waiting_on_a_lock(state["pid"]), what="the update waiting on the asset row")
    thread.join(60)

    assert isinstance(state.get("error"), ValidationError)
    assert "has served with it" in str(state["error"])
    assert ModelAsset.objects.get(pk=asset.pk).family == "qwen2.5"
    assert not Event.objects.filter(action="model_asset.updated").exists()


@pytest.mark.django_db(transaction=True)
def test_going_live_waits_for_an_update_in_flight_and_then_serves_what_it_wrote(team):
    revision = RevisionFactory(service__team=team)
    with transaction.atomic():
        services.update_revision(revision, actor=None, gateway_policy_version="gw-2")
        thread, state = _run_in_thread(
            lambda: services.set_live_revision(
                Service.objects.get(pk=revision.service_id),
                Revision.objects.get(pk=revision.pk),
                actor=None,
            )
        )
        _until(lambda: _waiting_on_a_lock(state["pid"]), what="going live waiting on the row")
    thread.join(60)

    assert "error" not in state
    served = Revision.objects.get(pk=revision.pk)
    assert (served.gateway_policy_version, served.served_at is not None) == ("gw-2", True)


def test_the_database_refuses_to_change_a_served_revision_written_around_the_verbs(
    live_revision,
):
    from django.db import DatabaseError

    for change in (
        {"context_limit": 4096},
        {"runtime": RuntimeFactory(team=live_revision.service.team)},
        {"fingerprint": "sha256:" + "1" * 64},
        {"served_at": None},
    ):
        with pytest.raises(DatabaseError, match="Cannot update rows"), transaction.atomic():
            Revision.objects.filter(pk=live_revision.pk).update(**change)
    Revision.objects.filter(pk=live_revision.pk).update(notes="still the rollback target")
    stored = Revision.objects.get(pk=live_revision.pk)
    assert (stored.context_limit, stored.notes) == (32768, "still the rollback target")


def test_a_revision_that_never_served_may_still_change_in_the_database(team):
    revision = RevisionFactory(service__team=team)

    other = services.policy_named(revision.service, "gw-9", actor=None)

    Revision.objects.filter(pk=revision.pk).update(gateway_policy=other)

    assert Revision.objects.get(pk=revision.pk).gateway_policy_version == "gw-9"
