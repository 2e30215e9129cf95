"""The application's database role can append to the ledger and read it, nothing else.

Connected as a role set up by `grant_app_role` (as docker-compose does), every
way a DBA-less attacker with the app's credentials could rewrite history is
refused by PostgreSQL itself: UPDATE, DELETE, TRUNCATE, turning triggers off
with `session_replication_role`, or dropping and disabling the trigger.
"""

from __future__ import annotations

import uuid
from io import StringIO

import psycopg
import pytest
from django.core.management import call_command
from django.db import connection, transaction

from ledger.chain import append_event
from ledger.models import Event

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
            "subject_id, subject_label, payload, prev_hash, hash) "
            "VALUES (2, now(), 'system', 'test.appended', 't', '2', '', '{}', 'x', 'y')"
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
