"""A chain whose tail is cut off is noticed: signed checkpoints of the head, kept
outside the database, and verify_ledger checking the chain against the newest one.

The attacks are a database administrator's: rows deleted or rewritten with the
append-only trigger out of the way (`session_replication_role = replica`, which
the test database's superuser may set), so only the checkpoint can tell.
"""

from __future__ import annotations

import base64
import io
import json
import uuid
from io import StringIO

import pytest
from django.core.files.storage import FileSystemStorage, default_storage
from django.core.management import call_command
from django.db import DatabaseError, connection, transaction

from ledger import checkpoints
from ledger.chain import append_event, compute_hash
from ledger.models import Event
from tests.support.processes import celery_worker, child_env, database_url

pytestmark = pytest.mark.django_db


def _append(n: int) -> None:
    for i in range(n):
        with transaction.atomic():
            append_event(
                actor=None, action="test.appended", subject=("test.row", str(i)), payload={"i": i}
            )


def _as_the_dba(sql: str, params: list | None = None) -> None:
    """What an administrator with the database's superuser can do past the triggers."""
    with connection.cursor() as cursor:
        cursor.execute("SET session_replication_role = replica")
        try:
            cursor.execute(sql, params or [])
        finally:
            cursor.execute("SET session_replication_role = DEFAULT")


def _verify() -> tuple[int, str, str]:
    out, err = StringIO(), StringIO()
    try:
        call_command("verify_ledger", stdout=out, stderr=err)
        code = 0
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    return code, out.getvalue(), err.getvalue()


def test_without_a_checkpoint_a_cut_tail_is_invisible_so_one_is_taken_and_it_is_not():
    _append(30)
    _as_the_dba("DELETE FROM ledger_event WHERE sequence = 30")
    assert _verify()[0] == 0  # the chain left behind is consistent: this is the hole

    _append(1)  # the chain is whole again at 30 …
    checkpoints.take_checkpoint(reason="test")
    _as_the_dba("DELETE FROM ledger_event WHERE sequence = 30")  # … and cut again

    code, _, err = _verify()
    assert code == 1
    assert "ledger cut short: event #30 is missing: the checkpoint #30" in err
    assert "and it now ends at #29" in err


def test_twenty_missing_events_are_named_as_a_range():
    _append(40)
    checkpoints.take_checkpoint(reason="test")
    _as_the_dba("DELETE FROM ledger_event WHERE sequence > 20")

    code, _, err = _verify()

    assert code == 1
    assert "events #21 to #40 are missing" in err


def test_a_tail_rewritten_with_consistent_hashes_is_caught_by_the_checkpoint():
    _append(5)
    checkpoints.take_checkpoint(reason="test")
    last = Event.objects.get(sequence=5)
    forged_payload = '{"i":999}'
    forged_hash = compute_hash(
        sequence=5,
        created_at=last.created_at,
        actor_label=last.actor_label,
        action=last.action,
        subject_type=last.subject_type,
        subject_id=last.subject_id,
        payload=forged_payload,
        prev_hash=last.prev_hash,
        service_id=last.service_id,
    )
    _as_the_dba(
        "UPDATE ledger_event SET payload = %s, hash = %s WHERE sequence = 5",
        [forged_payload, forged_hash],
    )

    code, _, err = _verify()

    assert code == 1
    assert "event #5 is not the one the checkpoint #5" in err


def test_an_edited_checkpoint_is_not_trusted():
    _append(3)
    checkpoint = checkpoints.take_checkpoint(reason="test")
    with default_storage.open(checkpoint.name) as stored:
        envelope = json.loads(stored.read())
    statement = json.loads(base64.b64decode(envelope["payload"]))
    statement["sequence"] = 2  # make an older head look like the newest
    envelope["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    default_storage.delete(checkpoint.name)
    default_storage.save(checkpoint.name, io.BytesIO(json.dumps(envelope).encode()))

    code, _, err = _verify()

    assert code == 1
    assert "the newest checkpoint cannot be trusted" in err
    assert "no valid signature" in err


def test_an_intact_ledger_reaches_its_checkpoint(capsys):
    _append(4)
    checkpoints.take_checkpoint(reason="test")
    _append(2)  # events after the checkpoint are fine

    code, out, _ = _verify()

    assert code == 0
    assert "ledger intact: 6 events" in out
    assert "reaches the newest checkpoint: #4" in out


def test_checkpoint_ledger_command_stores_a_signed_head():
    _append(2)
    out = StringIO()

    call_command("checkpoint_ledger", stdout=out)

    newest = checkpoints.newest_checkpoint()
    head = Event.objects.get(sequence=2)
    assert (newest.sequence, newest.hash) == (2, head.hash)
    assert f"checkpoint of #2 ({head.hash}) stored as {newest.name}" in out.getvalue()


@pytest.mark.django_db(transaction=True)
def test_the_database_refuses_to_truncate_the_event_table():
    _append(1)
    with (
        pytest.raises(DatabaseError, match="Cannot truncate"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute("TRUNCATE ledger_event")
    assert Event.objects.count() == 1


def test_the_verify_page_and_api_say_the_tail_was_cut(client, auditor):
    _append(10)
    checkpoints.take_checkpoint(reason="test")
    _as_the_dba("DELETE FROM ledger_event WHERE sequence > 8")
    client.force_login(auditor)

    page = client.get("/events/verify").content.decode()
    api = client.get("/api/events/verify/").json()

    assert "cut short" in page and "Events #9 to #10 are missing" in page
    assert '<span class="badge ok">intact</span>' not in page
    assert api["ok"] is False
    assert api["checkpoint"]["sequence"] == 10
    assert "events #9 to #10 are missing" in api["checkpoint"]["problem"]


@pytest.mark.django_db(transaction=True)
def test_the_beat_task_takes_a_checkpoint_on_a_real_worker(settings, tmp_path):
    _append(3)
    # The worker signs with the suite's one key (LEDGER_SIGNING_KEY_FILE); this process
    # verifies with it.
    data_dir = tmp_path / "worker-data"
    env = child_env(DATABASE_URL=database_url(connection.settings_dict), DATA_DIR=str(data_dir))
    queue = f"test-{uuid.uuid4().hex[:12]}"
    from ledger.tasks import checkpoint_ledger

    with celery_worker(env, queue=queue):
        result = checkpoint_ledger.apply_async(queue=queue).get(timeout=120)

    storage = FileSystemStorage(location=data_dir / "media")
    newest = checkpoints.newest_checkpoint(storage)
    assert result["sequence"] == newest.sequence == 3
    assert newest.hash == Event.objects.get(sequence=3).hash
    assert settings.CELERY_BEAT_SCHEDULE["checkpoint-ledger"]["task"] == "checkpoint_ledger"
