import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from ledger import locks, queries, services
from ledger.models import Event, Revision
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
