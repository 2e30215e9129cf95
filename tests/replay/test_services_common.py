"""The helpers the replay verbs share: the singleton lock of the periodic tasks."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, transaction

from replay.services.common import try_singleton_lock

# Each holder is a thread with its own connection, and the lock lasts until commit:
# the test commits too.
pytestmark = pytest.mark.django_db(transaction=True)


def test_a_second_taker_is_refused_while_the_lock_is_held_and_granted_after():
    taken, release = threading.Event(), threading.Event()
    holder_got: list[bool] = []

    def holder() -> None:
        try:
            with transaction.atomic():
                holder_got.append(try_singleton_lock("probe_backends"))
                taken.set()
                release.wait(30)
        finally:
            connection.close()

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert taken.wait(30), "the holder never took the lock"
        with transaction.atomic():
            while_held = try_singleton_lock("probe_backends")
            another_name = try_singleton_lock("reap_stale_runs")
    finally:
        release.set()
        thread.join(30)
    with transaction.atomic():
        after_release = try_singleton_lock("probe_backends")

    assert holder_got == [True]
    assert while_held is False
    assert another_name is True  # one lock per name
    assert after_release is True


def test_the_lock_is_only_taken_inside_a_transaction():
    # Outside one it would be released at once, and guard nothing.
    with pytest.raises(RuntimeError, match=r"inside transaction\.atomic\(\)"):
        try_singleton_lock("probe_backends")
