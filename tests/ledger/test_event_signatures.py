"""Each event carries the application's Ed25519 signature of its hash: rotation keeps
the old ones verifiable, the events of an upgraded ledger are signed once by the
migration, and the signing stays inside the append that hashes."""

from __future__ import annotations

import importlib
import subprocess
import sys
import types
import zipfile
from io import StringIO

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.apps import apps
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.db import DatabaseError, connection, transaction
from django.urls import reverse
from django.utils import timezone

from ledger import checkpoints, signing
from ledger.chain import append_event, compute_hash, verify_chain
from ledger.models import Event
from tests.ledger.test_exports import VERIFIER

pytestmark = pytest.mark.django_db


def _append(n: int, label: str = "x") -> list[Event]:
    events = []
    for i in range(n):
        with transaction.atomic():
            events.append(
                append_event(
                    actor=None, action="test.appended", subject=("t", label), payload={"i": i}
                )
            )
    return events


def _new_key() -> tuple[str, str]:
    """(private PEM, public PEM) of a fresh Ed25519 key."""
    private = Ed25519PrivateKey.generate()
    return (
        private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode(),
        private.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode(),
    )


def test_every_append_is_signed_by_the_signing_key():
    event, *_ = _append(1)
    stored = Event.objects.get(pk=event.pk)

    assert stored.key_id == signing.public_key().keyid
    problem = signing.event_signature_problem(
        stored.hash, stored.key_id, stored.signature, signing.trusted_keys()
    )
    assert problem is None


def test_after_a_rotation_old_events_verify_only_with_the_retired_key_listed(settings):
    old_public = signing.public_key_pem()
    before = _append(2, "old")
    checkpoints.take_checkpoint(reason="before rotation")
    new_private, _ = _new_key()
    settings.LEDGER_SIGNING_KEY = new_private
    after = _append(2, "new")

    assert after[0].key_id != before[0].key_id
    report = verify_chain()
    assert not report.ok
    assert report.first_bad_sequence == Event.objects.order_by("sequence").first().sequence
    assert (
        "neither the ledger's signing key nor one of LEDGER_RETIRED_PUBLIC_KEYS" in report.problem
    )

    settings.LEDGER_RETIRED_PUBLIC_KEYS = old_public
    assert verify_chain().ok
    # The checkpoint the old key signed still counts, and says which key signed it.
    ledger = checkpoints.verify_ledger()
    assert ledger.ok
    assert ledger.checkpoint.checkpoint.key_id == before[0].key_id


def test_checking_each_signature_across_a_rotation_needs_both_keys_pinned(settings, tmp_path):
    old_public = signing.public_key_pem()
    _append(2, "old")
    new_private, new_public = _new_key()
    settings.LEDGER_SIGNING_KEY = new_private
    settings.LEDGER_RETIRED_PUBLIC_KEYS = old_public
    _append(1, "new")
    bundle = tmp_path / "bundle.zip"
    call_command(
        "export_audit", since="2000-01-01", until="2100-01-01", format="bundle", output=str(bundle)
    )
    (tmp_path / "new.pem").write_text(new_public)
    (tmp_path / "old.pem").write_text(old_public)

    def verify(*keys: str) -> subprocess.CompletedProcess:
        options = [arg for key in keys for arg in ("--key", str(tmp_path / key))]
        return subprocess.run(
            [sys.executable, str(VERIFIER), str(bundle), "--all-signatures", *options],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    only_new = verify("new.pem")
    assert only_new.returncode == 1
    assert "which is not a key you pinned (after a rotation" in only_new.stdout
    both = verify("new.pem", "old.pem")
    assert both.returncode == 0, both.stdout + both.stderr
    assert "each event's signature checked" in both.stdout
    # The bundle carries both public keys, the signing key first.
    with zipfile.ZipFile(bundle) as archive:
        carried = archive.read("signing-key.pem").decode()
    assert carried == new_public + old_public


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("not a key", "holds no PEM public key"),
        (
            "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----",
            "key 1 is not a PEM public key",
        ),
    ],
)
def test_a_retired_key_that_is_not_one_is_refused_naming_the_setting(settings, value, message):
    settings.LEDGER_RETIRED_PUBLIC_KEYS = value

    with pytest.raises(ImproperlyConfigured, match=f"LEDGER_RETIRED_PUBLIC_KEYS.*{message}"):
        signing.trusted_keys()


def test_the_migration_signs_the_events_written_before_it(transactional_db):
    """An upgraded ledger: events without signatures, as the schema before left them,
    signed by the migration past the append-only trigger, hashes untouched."""
    _append(3)
    with connection.cursor() as cursor:
        cursor.execute("SET session_replication_role = replica")
        try:
            cursor.execute("UPDATE ledger_event SET key_id = '', signature = ''")
        finally:
            cursor.execute("SET session_replication_role = DEFAULT")
    hashes = list(Event.objects.order_by("sequence").values_list("hash", flat=True))
    assert "carries no signature" in verify_chain().problem

    migration = importlib.import_module("ledger.migrations.0013_event_signature")
    with transaction.atomic():
        migration.sign_existing_events(apps, types.SimpleNamespace(connection=connection))

    assert verify_chain().ok
    assert list(Event.objects.order_by("sequence").values_list("hash", flat=True)) == hashes
    # The trigger is back on: the ledger is append-only again.
    with pytest.raises(DatabaseError, match="Cannot update or delete rows"), transaction.atomic():
        Event.objects.update(signature="")


def test_the_audit_page_shows_each_fingerprint_to_pin(client, auditor, settings):
    old_public = signing.public_key_pem()
    old_fingerprint = signing.public_key().keyid
    settings.LEDGER_SIGNING_KEY, _ = _new_key()
    settings.LEDGER_RETIRED_PUBLIC_KEYS = old_public
    client.force_login(auditor)

    page = client.get(reverse("releases:audit")).content.decode()
    keys = client.get(reverse("ledger:signing_keys_pem"))
    served = client.get("/api/ledger/signing-key/").json()
    printed, fingerprint = StringIO(), StringIO()
    call_command("signing_key", "--with-retired", stdout=printed, stderr=fingerprint)

    current = signing.public_key().keyid
    assert f'Signing key: <code class="digest">{current}</code>' in page
    assert (
        f'Retired key (older events and bundles): <code class="digest">{old_fingerprint}</code>'
        in page
    )
    assert keys["Content-Disposition"] == 'attachment; filename="ledger-signing-keys.pem"'
    assert keys.content.decode() == signing.public_key_pem() + old_public == printed.getvalue()
    assert served["key_id"] == current
    assert served["retired_keys"] == [{"key_id": old_fingerprint, "public_key_pem": old_public}]
    assert f"fingerprint {current}" in fingerprint.getvalue()
    assert f"retired key, fingerprint {old_fingerprint}" in fingerprint.getvalue()


def test_the_keys_file_needs_a_signed_in_reader(client):
    response = client.get(reverse("ledger:signing_keys_pem"))

    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_a_retired_key_setting_that_cannot_be_read_fails_the_system_check(settings):
    from django.core.management.base import SystemCheckError

    settings.LEDGER_RETIRED_PUBLIC_KEYS = "the old key, somewhere"

    with pytest.raises(SystemCheckError, match=r"ledger\.E001.*LEDGER_RETIRED_PUBLIC_KEYS"):
        call_command("check")


def _insert_unsigned_next() -> int:
    """A correctly chained event without a signature, as the app role could insert."""
    head = Event.objects.order_by("-sequence").first()
    fields = {
        "sequence": head.sequence + 1,
        "created_at": timezone.now(),
        "actor_label": "sofia",
        "action": "release.signed_off",
        "subject_type": "releases.release",
        "subject_id": "1",
        "payload": "{}",
        "prev_hash": head.hash,
    }
    own = compute_hash(**fields, service_id=None)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO ledger_event (sequence, created_at, actor_label, action, subject_type, "
            "subject_id, subject_label, payload, prev_hash, hash, key_id, signature) "
            "VALUES (%s, %s, %s, %s, %s, %s, '', %s, %s, %s, '', '')",
            [*fields.values(), own],
        )
    return head.sequence + 1


def test_verification_checks_only_the_signatures_after_the_checkpoints_mark():
    _append(4)
    checkpoint = checkpoints.take_checkpoint(reason="test")
    assert (checkpoint.signed_through, checkpoint.signed_through_hash) == (
        checkpoint.sequence,
        checkpoint.hash,
    )
    _append(2)

    report = checkpoints.verify_ledger()

    assert report.ok
    assert report.chain.signatures_from == checkpoint.sequence + 1
    # An event forged after the mark is still named.
    forged = _insert_unsigned_next()
    report = checkpoints.verify_ledger()
    assert report.chain.first_bad_sequence == forged


def test_a_checkpoint_taken_over_a_forged_event_stops_its_mark_before_it():
    _append(2)
    forged = _insert_unsigned_next()
    _append(2)

    checkpoint = checkpoints.take_checkpoint(reason="test")
    report = checkpoints.verify_ledger()

    assert checkpoint.sequence == forged + 2
    assert checkpoint.signed_through == forged - 1
    assert report.chain.first_bad_sequence == forged
    assert "carries no signature" in report.chain.problem
    # The next checkpoint does not move the mark past it either.
    assert checkpoints.take_checkpoint(reason="again").signed_through == forged - 1


def test_a_rewritten_history_cannot_hide_behind_the_mark():
    """A DBA rewrites an event before the mark and recomputes every hash after it: the
    chain no longer reaches the mark's hash, so every signature is checked again."""
    events = _append(4)
    checkpoints.take_checkpoint(reason="test")
    victim = events[1]
    rows = list(Event.objects.filter(sequence__gte=victim.sequence).order_by("sequence"))
    prev = Event.objects.get(sequence=victim.sequence - 1).hash
    with connection.cursor() as cursor:
        cursor.execute("SET session_replication_role = replica")
        try:
            for row in rows:
                payload = '{"i":99}' if row.pk == victim.pk else row.payload
                own = compute_hash(
                    sequence=row.sequence,
                    created_at=row.created_at,
                    actor_label=row.actor_label,
                    action=row.action,
                    subject_type=row.subject_type,
                    subject_id=row.subject_id,
                    payload=payload,
                    prev_hash=prev,
                    service_id=row.service_id,
                )
                cursor.execute(
                    "UPDATE ledger_event SET payload = %s, prev_hash = %s, hash = %s WHERE id = %s",
                    [payload, prev, own, row.pk],
                )
                prev = own
        finally:
            cursor.execute("SET session_replication_role = DEFAULT")

    report = checkpoints.verify_ledger()

    assert report.chain.signatures_from == 1
    assert report.chain.first_bad_sequence == victim.sequence
    assert report.chain.problem.startswith("its signature does not verify")


def test_the_page_the_api_and_the_command_say_where_the_signatures_were_checked(client, auditor):
    _append(3)
    checkpoint = checkpoints.take_checkpoint(reason="test")
    _append(1)
    client.force_login(auditor)

    page = client.get(reverse("ledger:event_verify")).content.decode()
    api = client.get("/api/events/verify/").json()
    event = client.get(f"/api/events/{checkpoint.sequence}/").json()
    out = StringIO()
    call_command("verify_ledger", stdout=out)

    assert "carry the application's signature" in page
    assert (
        f"The signatures up to event #{checkpoint.sequence} were checked when it was taken" in page
    )
    assert api["ok"] and api["signatures_from"] == checkpoint.sequence + 1
    assert event["key_id"] == signing.public_key().keyid and len(event["signature"]) == 88
    assert f"signatures checked from #{checkpoint.sequence + 1}" in out.getvalue()


def test_a_long_unchecked_stretch_is_marked_over_several_checkpoints():
    """After the migration signed a large ledger, no one checkpoint checks it all."""
    events = _append(7)

    marks = [
        checkpoints.take_checkpoint(reason="test", signatures_at_most=3).signed_through
        for _ in range(4)
    ]

    assert marks == [3, 6, 7, 7]
    assert checkpoints.verify_ledger().chain.signatures_from == events[-1].sequence + 1
