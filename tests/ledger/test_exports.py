"""Auditor exports of the ledger: CSV that a spreadsheet cannot execute, JSON Lines that
round-trip, and an evidence bundle that scripts/verify_bundle.py verifies offline in a
subprocess — and each tamper it catches, with its own message."""

from __future__ import annotations

import base64
import csv
import datetime as dt
import hashlib
import io
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import time_machine
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.conf import settings
from django.core.management import CommandError, call_command

from ledger import services, signing
from ledger.chain import append_event, canonical_json
from ledger.exports.bundle import write_bundle
from ledger.models import Event
from tests.ledger.evidence.conftest import import_file, sample_asset, sample_runtime
from tests.ledger.factories import RevisionFactory, ServiceFactory

pytestmark = pytest.mark.django_db

VERIFIER = Path(settings.BASE_DIR) / "scripts" / "verify_bundle.py"
OCT = dt.datetime(2026, 10, 1, tzinfo=dt.UTC)
NOV = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)


@pytest.fixture
def history(team):
    """Events before, inside and after October 2026: a service, a revision and its
    load-test report inside."""
    with time_machine.travel(OCT - dt.timedelta(days=3), tick=False):
        ServiceFactory(slug="before", team=team)
    with time_machine.travel(OCT + dt.timedelta(days=2), tick=False):
        service = ServiceFactory(slug="kb-assistant", team=team)
        revision = RevisionFactory(
            service=service, model_asset=sample_asset(team), runtime=sample_runtime(team)
        )
        import_file(revision, "vllm", "vllm_c2_n20_detailed.json")
        services.update_service(service, actor=None, name='=HYPERLINK("http://evil")')
        # A label a spreadsheet would run as a formula, at the start of a cell.
        append_event(
            actor=None,
            action="test.note",
            subject=("test", "1"),
            subject_label='=HYPERLINK("http://evil")',
            payload={},
        )
    with time_machine.travel(NOV + dt.timedelta(days=1), tick=False):
        ServiceFactory(slug="after", team=team)
    return revision


@pytest.fixture
def key_file(tmp_path):
    path = tmp_path / "ledger-key.pem"
    path.write_text(signing.public_key_pem())
    return path


def _export(tmp_path, fmt="bundle", **options) -> Path:
    output = tmp_path / ("bundle.zip" if fmt == "bundle" else "out")
    call_command(
        "export_audit",
        since="2026-10-01",
        until="2026-11-01",
        format=fmt,
        output=str(output),
        **options,
    )
    return output


def _verify(bundle: Path, key: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(VERIFIER), str(bundle), "--key", str(key)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _rewrite(bundle: Path, changes: dict[str, bytes]) -> None:
    with zipfile.ZipFile(bundle) as source:
        members = {name: source.read(name) for name in source.namelist()}
    members.update(changes)
    with zipfile.ZipFile(bundle, "w") as target:
        for name, data in members.items():
            target.writestr(name, data)


def _resign(bundle: Path, tmp_path: Path, statement: dict | None = None) -> Path:
    """Sign the bundle's current contents with another key, as a server that exported an
    inconsistent segment would: the signature holds, so only the chain checks can object.
    The key file answered holds that key and the ledger's, whose signatures the events
    still carry. `statement`: what to sign instead of the bundle's own (subjects redone)."""
    private = Ed25519PrivateKey.generate()
    with zipfile.ZipFile(bundle) as source:
        names = [
            n for n in source.namelist() if n not in ("attestation.dsse.json", "signing-key.pem")
        ]
        digests = {n: hashlib.sha256(source.read(n)).hexdigest() for n in names}
        if statement is None:
            statement = json.loads(
                base64.b64decode(json.loads(source.read("attestation.dsse.json"))["payload"])
            )
    statement["subject"] = [{"name": n, "digest": {"sha256": d}} for n, d in digests.items()]
    payload = canonical_json(statement).encode()
    kind = b"application/vnd.in-toto+json"
    pae = b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)
    envelope = {
        "payload": base64.b64encode(payload).decode(),
        "payloadType": kind.decode(),
        "signatures": [{"keyid": "other", "sig": base64.b64encode(private.sign(pae)).decode()}],
    }
    _rewrite(bundle, {"attestation.dsse.json": json.dumps(envelope).encode()})
    key = tmp_path / "other-key.pem"
    key.write_bytes(
        private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        + signing.public_key_pem().encode()
    )
    return key


def _segment(bundle: Path) -> list[bytes]:
    with zipfile.ZipFile(bundle) as source:
        return source.read("chain/segment.jsonl").splitlines(keepends=True)


def test_a_bundle_verifies_offline_with_the_pinned_key(history, tmp_path, key_file):
    bundle = _export(tmp_path)
    result = _verify(bundle, key_file)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "verified:" in result.stdout and "key pinned" in result.stdout

    with zipfile.ZipFile(bundle) as archive:
        names = set(archive.namelist())
        segment = [json.loads(line) for line in archive.read("chain/segment.jsonl").splitlines()]
        records = [json.loads(line) for line in archive.read("records/events.jsonl").splitlines()]
    inside = list(
        Event.objects.filter(created_at__gte=OCT, created_at__lt=NOV).order_by("sequence")
    )
    assert [r["sequence"] for r in segment] == [inside[0].sequence - 1] + [
        e.sequence for e in inside
    ]
    assert [r["hash"] for r in records] == [e.hash for e in inside]
    assert f"boms/kb-assistant-{history.label}.cdx.json" in names
    report = history.loadtest_reports.get()
    assert any(n.startswith(f"evidence/{report.raw_sha256}") for n in names)


def test_a_revision_the_events_mention_brings_its_policy_document(team, owner, tmp_path):
    """The ledger's own bundle, without the higher apps' records: the policy version a
    BOM names is in the bundle as the canonical JSON its sha256 covers."""
    document = {
        "limits": {"max_input_tokens": 4096},
        "egress": {"external_fallback_allowed": False},
    }
    with time_machine.travel(OCT + dt.timedelta(days=2), tick=False):
        service = ServiceFactory(slug="kb-assistant", team=team)
        policy = services.create_gateway_policy(service, actor=owner, document=document)
        RevisionFactory(service=service, gateway_policy_version=policy.label)
    out = io.BytesIO()

    write_bundle(out, since=OCT, until=NOV)

    with zipfile.ZipFile(out) as archive:
        text = archive.read("gateway-policies/kb-assistant-v1.json")
        files = json.loads(archive.read("manifest.json"))["files"]
    assert "sha256:" + hashlib.sha256(text).hexdigest() == policy.sha256
    assert json.loads(text) == document
    assert {"path": "gateway-policies/kb-assistant-v1.json", "sha256": policy.sha256[7:]} in [
        {"path": f["path"], "sha256": f["sha256"]} for f in files
    ]


def test_the_verify_bundle_command_says_the_same(history, tmp_path, key_file):
    bundle = _export(tmp_path)
    from io import StringIO

    out = StringIO()
    call_command("verify_bundle", str(bundle), key=[str(key_file)], stdout=out)
    assert "verified:" in out.getvalue()


def test_a_changed_byte_in_a_file_is_named(history, tmp_path, key_file):
    bundle = _export(tmp_path)
    with zipfile.ZipFile(bundle) as source:
        records = bytearray(source.read("records/events.jsonl"))
    records[10] ^= 0x01
    _rewrite(bundle, {"records/events.jsonl": bytes(records)})
    result = _verify(bundle, key_file)
    assert result.returncode == 1
    assert "records/events.jsonl: sha256" in result.stdout
    assert "differs from the signed statement" in result.stdout


def test_a_manifest_edited_to_match_a_changed_file_is_caught(history, tmp_path, key_file):
    bundle = _export(tmp_path)
    with zipfile.ZipFile(bundle) as source:
        manifest = json.loads(source.read("manifest.json"))
        records = source.read("records/events.jsonl") + b'{"sequence": 999}\n'
    for entry in manifest["files"]:
        if entry["path"] == "records/events.jsonl":
            entry["sha256"] = hashlib.sha256(records).hexdigest()
    _rewrite(
        bundle, {"records/events.jsonl": records, "manifest.json": json.dumps(manifest).encode()}
    )
    result = _verify(bundle, key_file)
    assert result.returncode == 1
    assert "manifest.json: differs from the one the statement signed" in result.stdout


def test_a_replaced_signature_is_caught(history, tmp_path, key_file):
    bundle = _export(tmp_path)
    with zipfile.ZipFile(bundle) as source:
        envelope = json.loads(source.read("attestation.dsse.json"))
    envelope["signatures"][0]["sig"] = base64.b64encode(b"\x00" * 64).decode()
    _rewrite(bundle, {"attestation.dsse.json": json.dumps(envelope).encode()})
    result = _verify(bundle, key_file)
    assert result.returncode == 1
    assert "no signature in attestation.dsse.json verifies with the key given" in result.stdout


def test_a_removed_event_is_named_even_when_the_bundle_is_signed_again(history, tmp_path):
    bundle = _export(tmp_path)
    lines = _segment(bundle)
    removed = json.loads(lines[2])["sequence"]
    _rewrite(bundle, {"chain/segment.jsonl": b"".join(lines[:2] + lines[3:])})
    result = _verify(bundle, _resign(bundle, tmp_path))
    assert result.returncode == 1
    assert f"event #{removed} is missing" in result.stdout


def test_a_reordered_event_is_named_even_when_the_bundle_is_signed_again(history, tmp_path):
    bundle = _export(tmp_path)
    lines = _segment(bundle)
    lines[2], lines[3] = lines[3], lines[2]
    _rewrite(bundle, {"chain/segment.jsonl": b"".join(lines)})
    result = _verify(bundle, _resign(bundle, tmp_path))
    assert result.returncode == 1
    assert "the events are out of order" in result.stdout or "is missing" in result.stdout
    assert "chain/segment.jsonl line 3" in result.stdout


def test_an_edited_event_is_named_even_when_the_bundle_is_signed_again(history, tmp_path):
    bundle = _export(tmp_path)
    lines = _segment(bundle)
    record = json.loads(lines[2])
    record["actor"] = "someone-else"
    lines[2] = (canonical_json(record) + "\n").encode()
    _rewrite(bundle, {"chain/segment.jsonl": b"".join(lines)})
    result = _verify(bundle, _resign(bundle, tmp_path))
    assert result.returncode == 1
    assert f"(event #{record['sequence']}): its content does not match its hash" in result.stdout


def _verdict(bundle: Path, key: Path, **options) -> str:
    """The in-process verifier's verdict (the code the script runs)."""
    from ledger.management.commands.verify_bundle import verifier

    check = verifier()
    try:
        return check.verify(bundle, key.read_bytes(), **options)
    except check.Mismatch as error:
        return f"NOT VERIFIED: {error}"


# Blocks of 300 bytes hold about one line each, so every link between two events is
# checked across blocks, and handed to two processes.
SPLITS = [{"jobs": 1}, {"jobs": 2, "block_bytes": 300}, {"jobs": 1, "block_bytes": 300}]


def test_the_verdict_is_the_same_whatever_the_blocks_and_processes(history, tmp_path, key_file):
    bundle = _export(tmp_path)
    verdicts = {_verdict(bundle, key_file, **split) for split in SPLITS}
    assert len(verdicts) == 1
    (verdict,) = verdicts
    inside = Event.objects.filter(created_at__gte=OCT, created_at__lt=NOV).order_by("sequence")
    assert f"events #{inside.first().sequence} to #{inside.last().sequence}" in verdict
    assert f"{inside.count()} exported records in the chain" in verdict


@pytest.mark.parametrize("split", SPLITS, ids=["inline", "two-processes", "small-blocks"])
def test_each_tamper_is_named_whatever_the_blocks_and_processes(history, tmp_path, split):
    bundle = _export(tmp_path)
    lines = _segment(bundle)
    edited = json.loads(lines[4])
    edited["actor"] = "someone-else"
    removed = json.loads(lines[2])["sequence"]
    tampered = lines[:2] + lines[3:4] + [(canonical_json(edited) + "\n").encode()] + lines[5:]
    _rewrite(bundle, {"chain/segment.jsonl": b"".join(tampered)})
    key = _resign(bundle, tmp_path)

    # The first thing that does not match is named: the gap comes before the edit.
    assert f"event #{removed} is missing" in _verdict(bundle, key, **split)

    _rewrite(bundle, {"chain/segment.jsonl": b"".join(lines[:4] + tampered[3:])})
    key = _resign(bundle, tmp_path)
    assert _verdict(bundle, key, **split) == (
        f"NOT VERIFIED: chain/segment.jsonl line 5 (event #{edited['sequence']}): "
        "its content does not match its hash"
    )


def test_a_changed_file_is_named_as_changed_before_what_its_lines_say(history, tmp_path, key_file):
    bundle = _export(tmp_path)
    lines = _segment(bundle)
    _rewrite(bundle, {"chain/segment.jsonl": b"".join([*lines[:1], b"{not json\n", *lines[1:]])})

    verdict = _verdict(bundle, key_file, jobs=2, block_bytes=300)

    assert verdict.startswith("NOT VERIFIED: chain/segment.jsonl: sha256 ")
    assert "the file was changed after export" in verdict


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (b"{not json\n", "line 2: not JSON (Expecting property name"),
        (b"[1, 2]\n", "line 2: not a JSON object"),
        (b'{"sequence": "7"}\n', "line 2: sequence '7' is not a whole number"),
        (b'{"sequence": 1} trailing\n', "line 2: not JSON (extra data at column 17)"),
        (b"\xff\xfe\n", "line 2: not UTF-8 text"),
    ],
)
def test_a_line_that_cannot_be_read_is_named_even_when_signed_again(
    history, tmp_path, line, message
):
    bundle = _export(tmp_path)
    lines = _segment(bundle)
    _rewrite(bundle, {"chain/segment.jsonl": b"".join([*lines[:1], line, *lines[1:]])})

    result = _verify(bundle, _resign(bundle, tmp_path))

    assert result.returncode == 1, result.stdout + result.stderr
    assert f"NOT VERIFIED: chain/segment.jsonl {message}" in result.stdout
    assert "Traceback" not in result.stderr


def test_not_a_zip_is_exit_2(tmp_path, key_file):
    junk = tmp_path / "junk.zip"
    junk.write_text("not a zip")
    assert _verify(junk, key_file).returncode == 2


def test_the_export_records_a_checkpoint_and_the_chain_head(history, tmp_path, settings):
    from ledger.checkpoints import newest_checkpoint

    _export(tmp_path)
    checkpoint = newest_checkpoint()
    head = Event.objects.order_by("-sequence").first()
    assert (checkpoint.sequence, checkpoint.hash, checkpoint.reason) == (
        head.sequence,
        head.hash,
        "export",
    )


def test_csv_neutralises_formulas_and_keeps_a_header(history, tmp_path):
    out = _export(tmp_path, fmt="csv")
    with (out / "events.csv").open(encoding="utf-8", newline="") as file:
        rows = list(csv.DictReader(file))
    assert rows and list(rows[0]) == [
        "sequence",
        "created_at",
        "actor",
        "action",
        "subject_type",
        "subject_id",
        "subject_label",
        "service",
        "payload",
        "prev_hash",
        "hash",
    ]
    labels = [r["subject_label"] for r in rows]
    assert '\'=HYPERLINK("http://evil")' in labels
    assert not any(
        value.startswith(("=", "+", "-", "@", "\uff1d", "\uff0b", "\uff0d", "\uff20"))
        for r in rows
        for value in r.values()
    )


def test_json_lines_round_trip_the_events(history, tmp_path):
    out = _export(tmp_path, fmt="jsonl", service="kb-assistant")
    records = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    events = Event.objects.filter(service__slug="kb-assistant", created_at__lt=NOV).order_by(
        "sequence"
    )
    assert [(r["sequence"], r["payload"], r["hash"]) for r in records] == [
        (e.sequence, e.payload, e.hash) for e in events
    ]
    assert "=HYPERLINK" in json.dumps(records)  # JSON keeps values as they are


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"since": "last week"}, "--since 'last week': expected a date"),
        ({"until": "2026-09-01"}, "must be after --since"),
        ({"since": "2026-10-01T00:00:00-21:30"}, "offsets run from -15:59 to +15:59"),
    ],
)
def test_bad_periods_are_refused_naming_the_option(tmp_path, options, message):
    arguments = {"since": "2026-10-01", "until": "2026-11-01", **options}
    with pytest.raises(CommandError, match=re.escape(message)):
        call_command("export_audit", format="csv", output=str(tmp_path / "x"), **arguments)
    assert not (tmp_path / "x" / "events.csv").exists()


def test_the_signing_key_is_served_and_printed_the_same(client, auditor):
    from io import StringIO

    client.force_login(auditor)
    served = client.get("/api/ledger/signing-key/").json()
    printed = StringIO()
    call_command("signing_key", stdout=printed, stderr=StringIO())
    assert served["public_key_pem"] == printed.getvalue() == signing.public_key_pem()
    assert served["key_id"] == signing.public_key().keyid


def test_postgresqls_copy_writes_the_same_csv_as_the_python_path(history):
    from ledger.exports.events import EVENT_COLUMNS, copy_csv, event_rows, period_events
    from ledger.exports.tabular import csv_lines

    # Every formula start, the full-width = + - @ (U+FF1D, U+FF0B, U+FF0D, U+FF20),
    # and first characters that only look like one (or sit beside one in Unicode).
    labels = [
        "+1",
        "-1",
        "@SUM(A1)",
        "\tx",
        "\rx",
        "\uff1d1",
        "é=",
        "",
        "a-b",
        "\uff0b1",
        "\uff0d1",
        "\uff20SUM(A1)",
        "\uff0c1",
        "\uff1c1",
        "\uff21",
    ]
    # Fractions of a second of every length, written as long as they need to be.
    fractions = [0, 1, 500_000, 123_450, 999_999, 10, 0, 250_000, 7, 0, 0, 0, 0, 0, 0]
    for label, microseconds in zip(labels, fractions, strict=True):
        moment = OCT + dt.timedelta(days=5, seconds=len(label), microseconds=microseconds)
        with time_machine.travel(moment, tick=False):
            append_event(
                actor=None,
                action="test.note",
                subject=("test", "2"),
                subject_label=label,
                payload={},
            )
    by_copy = b"".join(copy_csv(OCT, NOV)).decode()
    by_python = "".join(csv_lines(EVENT_COLUMNS, event_rows(period_events(OCT, NOV))))
    copied = list(csv.reader(io.StringIO(by_copy, newline="")))
    written = list(csv.reader(io.StringIO(by_python, newline="")))
    assert len(copied) > 5
    assert copied == written
    assert any(row[6] == '\'=HYPERLINK("http://evil")' for row in copied)
    notes = [row for row in copied if row[3] == "test.note" and row[5] == "2"]
    assert [row[6] for row in notes] == [
        "'+1",
        "'-1",
        "'@SUM(A1)",
        "'\tx",
        "'\rx",
        "'\uff1d1",
        "é=",
        "",
        "a-b",
        "'\uff0b1",
        "'\uff0d1",
        "'\uff20SUM(A1)",
        "\uff0c1",
        "\uff1c1",
        "\uff21",
    ]
    assert [row[1][17:] for row in notes] == [
        "02+00:00",
        "02.000001+00:00",
        "08.5+00:00",
        "02.12345+00:00",
        "02.999999+00:00",
        "02.00001+00:00",
        "02+00:00",
        "00.25+00:00",
        "03.000007+00:00",
        "02+00:00",
        "02+00:00",
        "08+00:00",
        "02+00:00",
        "02+00:00",
        "01+00:00",
    ]


def test_the_copys_moments_do_not_follow_the_connections_date_style(history):
    from django.db import connection

    from ledger.exports.events import copy_csv

    iso = b"".join(copy_csv(OCT, NOV))
    with connection.cursor() as cursor:
        cursor.execute("SET datestyle TO 'German'")
        try:
            german = b"".join(copy_csv(OCT, NOV))
        finally:
            cursor.execute("SET datestyle TO 'ISO, MDY'")
    assert german == iso
    assert b",2026-10-03T00:00:00+00:00," in iso
