"""The application's database role can append to the ledger and read it, nothing else.

Connected as a role set up by `grant_app_role` (as docker-compose does), every
way a DBA-less attacker with the app's credentials could rewrite history is
refused by PostgreSQL itself: UPDATE, DELETE, TRUNCATE, turning triggers off
with `session_replication_role`, or dropping and disabling the trigger. What the
role may do — INSERT — cannot make an event that verifies: each event carries the
application's signature, made with a key the database never sees.
"""

from __future__ import annotations

import datetime as dt
import uuid
from io import StringIO

import psycopg
import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.utils import timezone

from ledger import signing
from ledger.chain import append_event, canonical_json, compute_hash, verify_chain
from ledger.models import Event
from tests.ledger.test_exports import _verify as verify_offline

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def app_role():
    role = f"ledger_app_{uuid.uuid4().hex[:10]}"
    with connection.cursor() as cursor:
        cursor.execute(f'CREATE ROLE "{role}" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE')
    yield role
    with connection.cursor() as cursor:
        cursor.execute(f'DROP OWNED BY "{role}"')
        cursor.execute(f'DROP ROLE "{role}"')


def _connect_as(role: str) -> psycopg.Connection:
    settings = connection.settings_dict
    return psycopg.connect(
        dbname=settings["NAME"],
        user=role,
        host=settings.get("HOST") or "127.0.0.1",
        port=settings.get("PORT") or 5432,
        autocommit=True,
    )


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE ledger_event SET action = 'forged'",
        "DELETE FROM ledger_event",
        "TRUNCATE ledger_event",
        "SET session_replication_role = replica",
        "ALTER TABLE ledger_event DISABLE TRIGGER ALL",
        "DROP TRIGGER {append_only} ON ledger_event",
    ],
)
def test_the_app_role_cannot_rewrite_the_ledger(app_role, statement):
    with transaction.atomic():
        append_event(actor=None, action="test.appended", subject=("t", "1"), payload={})
    call_command("grant_app_role", app_role, stdout=StringIO())
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tgname FROM pg_trigger WHERE tgrelid = 'ledger_event'::regclass "
            "AND tgname LIKE 'pgtrigger_ledger_event_append_only%%'"
        )
        (append_only,) = cursor.fetchone()

    with _connect_as(app_role) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute(statement.format(append_only=append_only))
    assert Event.objects.get().action == "test.appended"


def test_the_app_role_reads_appends_and_writes_the_other_tables(app_role):
    with transaction.atomic():
        append_event(actor=None, action="test.appended", subject=("t", "1"), payload={})
    call_command("grant_app_role", app_role, stdout=StringIO())

    with _connect_as(app_role) as conn:
        assert conn.execute("SELECT count(*) FROM ledger_event").fetchone() == (1,)
        conn.execute(
            "INSERT INTO ledger_event (sequence, created_at, actor_label, action, subject_type, "
            "subject_id, subject_label, payload, prev_hash, hash, key_id, signature) "
            "VALUES (2, now(), 'system', 'test.appended', 't', '2', '', '{}', 'x', 'y', '', '')"
        )
        conn.execute("INSERT INTO ledger_tasktype (slug, name) VALUES ('chat', 'chat')")
        conn.execute("UPDATE ledger_tasktype SET name = 'Chat' WHERE slug = 'chat'")
        conn.execute("DELETE FROM ledger_tasktype WHERE slug = 'chat'")
    assert Event.objects.count() == 2


def test_grant_app_role_refuses_a_superuser_and_a_missing_role():
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="superuser"):
        call_command("grant_app_role", connection.settings_dict["USER"] or "root")
    with pytest.raises(CommandError, match="There is no role 'nobody-here'"):
        call_command("grant_app_role", "nobody-here")


def _forge_next_event(conn: psycopg.Connection, *, signature: str = "", key_id: str = "") -> int:
    """What the app role's password allows: a correctly chained event ("security signed
    off"), hashed exactly as the application hashes, inserted at the head."""
    sequence, prev_hash = conn.execute(
        "SELECT sequence, hash FROM ledger_event ORDER BY sequence DESC LIMIT 1"
    ).fetchone()
    created_at = timezone.now()
    fields = {
        "sequence": sequence + 1,
        "created_at": created_at,
        "actor_label": "sofia",
        "action": "release.signed_off",
        "subject_type": "releases.release",
        "subject_id": "1",
        "payload": canonical_json({"decision": "approve", "role": "security_compliance"}),
        "prev_hash": prev_hash,
    }
    own = compute_hash(**fields, service_id=None)
    conn.execute(
        "INSERT INTO ledger_event (sequence, created_at, actor_label, action, subject_type, "
        "subject_id, subject_label, payload, prev_hash, hash, key_id, signature) "
        "VALUES (%s, %s, %s, %s, %s, %s, '', %s, %s, %s, %s, %s)",
        [*fields.values(), own, key_id, signature],
    )
    return sequence + 1


def test_an_event_chained_with_the_app_roles_password_alone_is_named(
    app_role, client, auditor, tmp_path
):
    with transaction.atomic():
        for i in range(3):
            append_event(actor=None, action="test.appended", subject=("t", str(i)), payload={})
    call_command("grant_app_role", app_role, stdout=StringIO())

    with _connect_as(app_role) as conn:
        forged = _forge_next_event(conn)
    # The next genuine append links onto it, and is signed: the forged one stays named.
    with transaction.atomic():
        append_event(actor=None, action="test.appended", subject=("t", "4"), payload={})

    report = verify_chain()
    assert not report.ok
    assert report.first_bad_sequence == forged
    assert "carries no signature" in report.problem

    out, err = StringIO(), StringIO()
    with pytest.raises(SystemExit) as exit_:
        call_command("verify_ledger", stdout=out, stderr=err)
    assert exit_.value.code == 1
    assert f"ledger broken at event #{forged}: it carries no signature" in err.getvalue()

    client.force_login(auditor)
    page = client.get("/events/verify").content.decode()
    assert f"Event #{forged}: it carries no signature" in page

    bundle = tmp_path / "bundle.zip"
    today = timezone.now().date()
    call_command(
        "export_audit",
        since=str(today - dt.timedelta(days=1)),
        until=str(today + dt.timedelta(days=1)),
        format="bundle",
        output=str(bundle),
    )
    key = tmp_path / "ledger-key.pem"
    key.write_text(signing.public_key_pem())
    result = verify_offline(bundle, key)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"(event #{forged}): it carries no signature" in result.stdout


def test_a_signature_copied_from_another_event_does_not_vouch_for_a_forged_one(app_role):
    with transaction.atomic():
        genuine = append_event(actor=None, action="test.appended", subject=("t", "1"), payload={})
    call_command("grant_app_role", app_role, stdout=StringIO())

    with _connect_as(app_role) as conn:
        forged = _forge_next_event(conn, signature=genuine.signature, key_id=genuine.key_id)

    report = verify_chain()
    assert report.first_bad_sequence == forged
    assert report.problem.startswith("its signature does not verify with key")
