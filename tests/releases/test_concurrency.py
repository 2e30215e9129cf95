"""Two people pressing the same button at once: the transition applies once (PostgreSQL).

The first thread takes the release's row lock and holds it until PostgreSQL
reports the second thread waiting for that lock (pg_stat_activity), so the two
really overlap; then the first commits and the second must find the state
moved on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from django.db import connection, connections, transaction

from ledger.models import Event
from releases.governance import services
from releases.governance.services import TransitionRefused
from releases.models import Release, SignOff
from tests.factories import UserFactory
from tests.releases.factories import build_world, file_release

pytestmark = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="row locks are PostgreSQL's"
)

WAIT_SECONDS = 30


def _someone_waits_for_a_lock(timeout: float = WAIT_SECONDS) -> bool:
    """Until a backend of this database waits on a lock (an event, polled), or timeout."""
    deadline = time.monotonic() + timeout
    with connections["default"].cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
            if cursor.fetchone()[0]:
                return True
            time.sleep(0.01)
    return False


def _race(first: Callable[[], object], second: Callable[[], object]) -> list[object]:
    """Run `first` holding its transaction open until `second` waits for its lock."""
    outcomes: list[object] = [None, None]
    first_locked = threading.Event()
    second_waits = threading.Event()

    def run_first() -> None:
        try:
            with transaction.atomic():
                outcomes[0] = first()
                first_locked.set()
                second_waits.wait(WAIT_SECONDS)
        except Exception as exc:  # the outcome is what the test looks at
            outcomes[0] = exc
            first_locked.set()
        finally:
            connections.close_all()

    def run_second() -> None:
        first_locked.wait(WAIT_SECONDS)
        try:
            outcomes[1] = second()
        except Exception as exc:
            outcomes[1] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run_first), threading.Thread(target=run_second)]
    for thread in threads:
        thread.start()
    first_locked.wait(WAIT_SECONDS)
    assert _someone_waits_for_a_lock(), "the second thread never waited for the row lock"
    second_waits.set()
    for thread in threads:
        thread.join(WAIT_SECONDS)
    return outcomes


def _submitted_events(release: Release) -> int:
    return (
        Event.objects.for_subject("releases.release", release.pk)
        .filter(action="release.submitted")
        .count()
    )


@pytest.mark.django_db(transaction=True)
def test_two_submits_at_once_apply_once(team, owner):
    world = build_world(team)
    release = file_release(world, owner)

    def submit() -> object:
        return services.submit_release(Release.objects.get(pk=release.pk), actor=owner)

    first, second = _race(submit, submit)
    assert isinstance(first, Release)
    assert isinstance(second, TransitionRefused)
    assert "is submitted; only a draft release can be submitted" in str(second)
    assert _submitted_events(release) == 1


@pytest.mark.django_db(transaction=True)
def test_two_signers_of_one_role_at_once_sign_once(team, owner):
    world = build_world(team)
    release = file_release(world, owner)
    services.submit_release(release, actor=owner)
    sam = UserFactory(username="sam", roles=["platform_sre"])
    pat = UserFactory(username="pat", roles=["platform_sre"])

    def sign(user) -> Callable[[], object]:
        return lambda: services.sign_off(
            Release.objects.get(pk=release.pk), actor=user, role="platform", decision="approve"
        )

    first, second = _race(sign(sam), sign(pat))
    assert isinstance(first, SignOff)
    assert isinstance(second, TransitionRefused)
    assert str(second) == f"sam already signed for platform (approve) on release #{release.pk}."
    assert SignOff.objects.filter(release=release).count() == 1
    assert (
        Event.objects.for_subject("releases.release", release.pk)
        .filter(action="release.signed_off")
        .count()
        == 1
    )


@pytest.mark.django_db(transaction=True)
def test_the_last_two_approvals_at_once_approve_once(team, owner, sre, security, business):
    world = build_world(team)
    release = file_release(world, owner)
    mona = UserFactory(username="mona", roles=["model_owner"])
    team.members.add(mona)
    services.submit_release(release, actor=owner)
    services.sign_off(release, actor=mona, role="model_team", decision="approve")
    services.sign_off(release, actor=sre, role="platform", decision="approve")

    def sign(user, role) -> Callable[[], object]:
        return lambda: services.sign_off(
            Release.objects.get(pk=release.pk), actor=user, role=role, decision="approve"
        )

    first, second = _race(sign(security, "security_compliance"), sign(business, "business_owner"))
    assert isinstance(first, SignOff) and isinstance(second, SignOff)
    release.refresh_from_db()
    assert release.state == "approved"
    assert (
        Event.objects.for_subject("releases.release", release.pk)
        .filter(action="release.approved")
        .count()
        == 1
    )
