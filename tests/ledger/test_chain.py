"""The event ledger: canonical payloads, one linear chain, tampering caught."""

import subprocess
import sys
import threading

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.db import DatabaseError, connection, connections, transaction

from ledger import services
from ledger.chain import (
    GENESIS_HASH,
    NewEvent,
    append_event,
    append_events,
    canonical_json,
    verify_chain,
)
from ledger.models import Event
from tests.ledger.factories import ModelAssetFactory, ServiceFactory
from tests.support.processes import ROOT, child_env, database_url, run_manage


def _append(n: int, label: str) -> None:
    for i in range(n):
        with transaction.atomic():
            append_event(
                actor=None, action="test.appended", subject=("test.thing", label), payload={"i": i}
            )


def _assert_linear(expected: int) -> None:
    rows = list(Event.objects.order_by("sequence").values_list("sequence", "prev_hash", "hash"))
    assert [row[0] for row in rows] == list(range(1, expected + 1))
    previous = GENESIS_HASH
    for _, prev_hash, own_hash in rows:
        assert prev_hash == previous
        previous = own_hash
    assert verify_chain().ok


def test_canonical_json_sorts_keys_and_drops_spaces():
    assert (
        canonical_json({"b": 1, "a": {"d": [1, 2], "c": "é"}}) == '{"a":{"c":"é","d":[1,2]},"b":1}'
    )


def test_a_change_and_its_event_are_one_transaction(team):
    service = ServiceFactory(team=team, slo_ttft_p95_ms=500)
    count = Event.objects.count()

    services.update_service(service, actor=None, slo_ttft_p95_ms=800, name=service.name)

    event = Event.objects.order_by("-sequence").first()
    assert Event.objects.count() == count + 1
    assert event.action == "service.updated"
    assert (event.subject_type, event.subject_id) == ("ledger.service", str(service.pk))
    assert event.payload_data == {
        "before": {"slo_ttft_p95_ms": 500},
        "after": {"slo_ttft_p95_ms": 800},
    }
    assert event.payload == '{"after":{"slo_ttft_p95_ms":800},"before":{"slo_ttft_p95_ms":500}}'


def test_an_update_that_changes_nothing_appends_nothing(team):
    service = ServiceFactory(team=team, tier="internal")
    count = Event.objects.count()

    assert services.update_service(service, actor=None, tier="internal") is False
    assert Event.objects.count() == count


def test_a_refused_change_leaves_no_event_and_no_row(team):
    count = Event.objects.count()

    with pytest.raises(ValidationError, match="weights_digest"):
        ModelAssetFactory(team=team, weights_digest="nope")
    assert Event.objects.count() == count


def test_many_events_append_in_order_in_a_few_statements(team, django_assert_num_queries):
    service = ServiceFactory(team=team)
    before = Event.objects.order_by("-sequence").first()
    entries = [
        NewEvent(action="test.bulk", subject=("test.thing", str(i)), payload={"i": i})
        for i in range(1500)
    ]
    entries.append(NewEvent(action="test.bulk_service", subject=service, payload={}))

    # The chain lock, the head, and the rows 1,000 an INSERT.
    with transaction.atomic(), django_assert_num_queries(4):
        events = append_events(entries, actor=None)

    first = (before.sequence if before else 0) + 1
    assert [e.sequence for e in events] == list(range(first, first + 1501))
    assert events[0].prev_hash == (before.hash if before else GENESIS_HASH)
    stored = dict(Event.objects.filter(action="test.bulk").values_list("pk", "payload"))
    assert [stored[e.pk] for e in events[:3]] == ['{"i":0}', '{"i":1}', '{"i":2}']
    assert events[-1].service_id == service.pk  # as append_event would say
    # The next single append links onto the last of them.
    with transaction.atomic():
        after = append_event(actor=None, action="test.one", subject=service, payload={})
    assert after.prev_hash == events[-1].hash
    assert verify_chain().ok
    with transaction.atomic(), django_assert_num_queries(0):
        assert append_events([], actor=None) == []


def test_appending_outside_a_transaction_is_refused(transactional_db):
    with pytest.raises(RuntimeError, match=r"inside transaction\.atomic"):
        append_event(actor=None, action="x", subject=("t", "1"), payload={})


def test_concurrent_writer_threads_leave_one_linear_chain(transactional_db):
    threads = [threading.Thread(target=_run_and_close, args=(25, f"w{n}")) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    _assert_linear(8 * 25)


def _run_and_close(n: int, label: str) -> None:
    try:
        _append(n, label)
    finally:
        connections.close_all()


def test_concurrent_writer_processes_leave_one_linear_chain(transactional_db, tmp_path):
    # Its own data folder: verify_ledger reads checkpoints from DATA_DIR/media, and the
    # checkout's var/ may hold some of another database (a benchmark's, make run's).
    env = child_env(DATABASE_URL=database_url(connection.settings_dict), DATA_DIR=str(tmp_path))
    script = (
        "from django.db import transaction\n"
        "from ledger.chain import append_event\n"
        "for i in range(40):\n"
        "    with transaction.atomic():\n"
        "        append_event(actor=None, action='test.appended', subject=('test.proc', '1'), payload={'i': i})\n"
    )
    processes = [
        subprocess.Popen([sys.executable, "manage.py", "shell", "-c", script], cwd=ROOT, env=env)
        for _ in range(3)
    ]
    _append(40, "test-process")  # and this process at the same time
    assert [p.wait(timeout=120) for p in processes] == [0, 0, 0]

    _assert_linear(4 * 40)
    assert run_manage("verify_ledger", env=env).returncode == 0


def test_the_database_refuses_to_update_or_delete_events(team):
    ServiceFactory(team=team)
    event = Event.objects.first()

    with pytest.raises(DatabaseError, match="Cannot update or delete rows"), transaction.atomic():
        Event.objects.filter(pk=event.pk).update(action="service.forged")
    with pytest.raises(DatabaseError, match="Cannot update or delete rows"), transaction.atomic():
        Event.objects.filter(pk=event.pk).delete()
    with pytest.raises(DatabaseError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("UPDATE ledger_event SET payload = '{}' WHERE id = %s", [event.pk])


def test_verify_ledger_prints_the_count_and_head(team, capsys):
    ServiceFactory(team=team)
    head = Event.objects.order_by("-sequence").first()

    call_command("verify_ledger")

    out = capsys.readouterr().out
    assert f"ledger intact: {Event.objects.count()} events, head {head.hash}" in out


def test_verify_ledger_names_the_first_event_changed_behind_the_apps_back(team, capsys):
    for n in range(3):
        ServiceFactory(team=team, slug=f"svc-{n}")
    victim = Event.objects.order_by("sequence")[1]
    with connection.cursor() as cursor:
        # What a DBA could do: switch triggers off for the transaction and rewrite history.
        cursor.execute("SET LOCAL session_replication_role = replica")
        cursor.execute(
            "UPDATE ledger_event SET payload = replace(payload, %s, %s) WHERE id = %s",
            ["svc-1", "svc-X", victim.pk],
        )
        cursor.execute("SET LOCAL session_replication_role = origin")

    with pytest.raises(SystemExit) as excinfo:
        call_command("verify_ledger")

    assert excinfo.value.code == 1
    err = capsys.readouterr().err
    assert f"ledger broken at event #{victim.sequence}" in err
    assert "does not match its hash" in err


def test_a_deleted_event_breaks_the_links(team):
    for n in range(3):
        ServiceFactory(team=team, slug=f"svc-{n}")
    middle = Event.objects.order_by("sequence")[1]
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL session_replication_role = replica")
        cursor.execute("DELETE FROM ledger_event WHERE id = %s", [middle.pk])
        cursor.execute("SET LOCAL session_replication_role = origin")

    report = verify_chain()

    assert not report.ok
    assert report.first_bad_sequence == middle.sequence + 1
    assert "sequence jumps" in report.problem
