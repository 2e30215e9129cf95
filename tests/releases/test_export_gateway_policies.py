"""Exports carry gateway policy versions as records: each revision the selection names
with its policy version (label, known, sha256), each version those revisions run with
(its document as canonical JSON, who recorded it and the Event that did), and the
bundle a copy of each known document that scripts/verify_bundle.py checks against its
record."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import time_machine
from django.conf import settings
from django.urls import reverse

from ledger import services as ledger_services
from ledger import signing
from ledger.management.commands.verify_bundle import verifier
from ledger.models import Event
from releases.audit.records import AuditFilters
from releases.audit.services import exports
from releases.models import Export
from tests.ledger.factories import RevisionFactory
from tests.releases.factories import build_world, file_release

pytestmark = pytest.mark.django_db

VERIFIER = Path(settings.BASE_DIR) / "scripts" / "verify_bundle.py"
SEP = dt.datetime(2026, 9, 1, tzinfo=dt.UTC)
OCT = dt.datetime(2026, 10, 1, tzinfo=dt.UTC)
NOV = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
POLICY = {
    "limits": {"max_input_tokens": 8192, "max_output_tokens": 1024, "timeout_s": 60},
    "egress": {"external_fallback_allowed": False},
}


@pytest.fixture
def release(team, owner):
    """kb-assistant's live r3 runs gw-1, recorded by name only (unknown); v2, recorded in
    September with a document, is what the October release's candidate runs with."""
    with time_machine.travel(SEP - dt.timedelta(days=1), tick=False):
        world = build_world(team)  # before the period: its r1, r2 and v1 are not in it
    with time_machine.travel(SEP, tick=False):
        ledger_services.create_gateway_policy(world.service, actor=owner, document=POLICY)
    with time_machine.travel(OCT + dt.timedelta(days=4), tick=False):
        # The world's revisions run its complete v1; the live one here names gw-1 only.
        live = RevisionFactory(
            service=world.service, runtime=world.live.runtime, gateway_policy_version="gw-1"
        )
        ledger_services.set_live_revision(world.service, live, actor=None, reason="by name")
        world.service.refresh_from_db()
        candidate = RevisionFactory(
            service=world.service, runtime=world.live.runtime, gateway_policy_version="v2"
        )
        return file_release(dataclasses.replace(world, live=live, candidate=candidate), owner)


def _export(auditor, fmt: str) -> Export:
    export = exports.request_export(
        actor=auditor, format=fmt, filters=AuditFilters(since=OCT, until=NOV)
    )
    return exports.build_export(export.pk)


def _archive(export: Export) -> zipfile.ZipFile:
    with export.file.open("rb") as stored:
        return zipfile.ZipFile(io.BytesIO(stored.read()))


def _lines(archive: zipfile.ZipFile, name: str) -> list[dict]:
    return [json.loads(line) for line in archive.open(name)]


def test_each_revision_record_names_its_policy_version(auditor, release):
    archive = _archive(_export(auditor, "jsonl"))

    revisions = {r["revision"]: r for r in _lines(archive, "revisions.jsonl")}
    live, candidate = release.from_revision, release.to_revision
    assert revisions[live.label]["gateway_policy"] == "gw-1"
    assert revisions[live.label]["gateway_policy_known"] is False
    assert revisions[candidate.label]["gateway_policy"] == "v2"
    assert revisions[candidate.label]["gateway_policy_known"] is True
    assert revisions[candidate.label]["gateway_policy_sha256"] == candidate.gateway_policy.sha256
    assert revisions[candidate.label]["fingerprint"] == candidate.fingerprint


def test_each_policy_version_a_revision_names_is_a_record_with_its_document(auditor, release):
    archive = _archive(_export(auditor, "jsonl"))

    # v2 was recorded in September, before the period: a revision of the period names it.
    policies = {p["label"]: p for p in _lines(archive, "gateway_policies.jsonl")}
    assert set(policies) == {"gw-1", "v2"}
    known = policies["v2"]
    assert (known["service"], known["version"], known["known"]) == ("kb-assistant", 2, True)
    assert known["created_by"] == "olivia"
    assert known["created_at"] == "2026-09-01T00:00:00+00:00"
    # The cell is the text the sha256 was computed over: an auditor hashes it.
    assert "sha256:" + hashlib.sha256(known["document"].encode()).hexdigest() == known["sha256"]
    assert json.loads(known["document"]) == POLICY
    event = Event.objects.get(
        action="gateway_policy.created",
        subject_type="ledger.gatewaypolicy",
        subject_id=str(known["id"]),
    )
    assert (known["event_sequence"], known["event_hash"]) == (event.sequence, event.hash)
    assert event.payload_data["sha256"] == known["sha256"]
    unknown = policies["gw-1"]
    assert (unknown["known"], unknown["document"]) == (False, None)


def test_the_csv_carries_the_same_records(auditor, release):
    archive = _archive(_export(auditor, "csv"))

    header = archive.read("gateway_policies.csv").decode().splitlines()[0]
    assert header == (
        "id,service,version,label,known,sha256,document,note,created_by,created_at,"
        "event_sequence,event_hash"
    )
    manifest = json.loads(archive.read("manifest.json"))
    assert manifest["records"]["gateway_policies"] == 2
    # r3 and r4, which the release names (r1 and r2 were made before the period).
    assert manifest["records"]["revisions"] == 2


def test_the_bundle_carries_each_known_document_and_verifies_offline(auditor, release, tmp_path):
    export = _export(auditor, "bundle")
    bundle = tmp_path / export.filename
    with export.file.open("rb") as stored:
        bundle.write_bytes(stored.read())
    archive = zipfile.ZipFile(bundle)
    names = set(archive.namelist())

    assert {"records/revisions.jsonl", "records/gateway_policies.jsonl"} <= names
    candidate = release.to_revision
    # The file is the canonical JSON: its digest in the manifest is the version's sha256.
    document = archive.read("gateway-policies/kb-assistant-v2.json")
    assert "sha256:" + hashlib.sha256(document).hexdigest() == candidate.gateway_policy.sha256
    manifest = json.loads(archive.read("manifest.json"))
    digests = {f["path"]: f["sha256"] for f in manifest["files"]}
    assert "sha256:" + digests["gateway-policies/kb-assistant-v2.json"] == (
        candidate.gateway_policy.sha256
    )
    # An unknown version has no document to carry.
    assert not any(n.startswith("gateway-policies/kb-assistant-gw-1") for n in names)
    # Each revision the records name has its BOM, naming the same version.
    bom = json.loads(archive.read(f"boms/kb-assistant-{candidate.label}.cdx.json"))
    policy = next(c for c in bom["components"] if c["bom-ref"].startswith("gateway-"))
    assert policy["version"] == "v2"
    assert "boms/kb-assistant-r3.cdx.json" in names
    key = tmp_path / "key.pem"
    key.write_text(signing.public_key_pem())
    result = subprocess.run(
        [sys.executable, str(VERIFIER), str(bundle), "--key", str(key)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 gateway policy documents match their records" in result.stdout


def test_the_verifier_names_a_document_that_does_not_match_its_record(auditor, release, tmp_path):
    """Both files are signed, so only an exporter at fault (or a re-signed bundle) could
    disagree; the verifier still says which."""
    export = _export(auditor, "bundle")
    with export.file.open("rb") as stored:
        original = zipfile.ZipFile(io.BytesIO(stored.read()))
    changed = tmp_path / "changed.zip"
    with zipfile.ZipFile(changed, "w") as target:
        for name in original.namelist():
            data = original.read(name)
            if name == "gateway-policies/kb-assistant-v2.json":
                data = data.replace(b"1024", b"4096")
            target.writestr(name, data)

    check = verifier().check_gateway_policies
    with zipfile.ZipFile(changed) as archive, pytest.raises(verifier().Mismatch) as mismatch:
        check(archive, set(archive.namelist()))

    assert str(mismatch.value) == (
        "gateway-policies/kb-assistant-v2.json: differs from the document its record carries"
    )


def test_the_audit_page_lists_revisions_and_policy_versions(client, auditor, release):
    client.force_login(auditor)
    period = {"date_from": "2026-10-01", "date_to": "2026-10-31"}

    revisions = client.get(reverse("releases:audit"), {**period, "type": "revisions"})
    policies = client.get(reverse("releases:audit"), {**period, "type": "gateway_policies"})
    engine = client.get(reverse("releases:audit"), {**period, "change_kind": "engine_upgrade"})

    body = revisions.content.decode()
    assert revisions.status_code == 200
    assert "kb-assistant r4" in body and "v2 <code" in body and "unknown" in body
    body = policies.content.decode()
    assert "kb-assistant v2" in body and "kb-assistant gw-1" in body
    assert "recorded by name only" in body
    # A release filter keeps only what matching releases name: none here.
    counts = {record.key: count for record, count in engine.context["counts"]}
    assert (counts["revisions"], counts["gateway_policies"]) == (0, 0)


def test_the_change_record_names_both_policy_versions(client, auditor, release):
    client.force_login(auditor)

    response = client.get(reverse("releases:change_record", args=[release.pk]))

    html = response.content.decode()
    start = html.index('<dd id="gateway-policy">')
    shown = html[start : html.index("</dd>", start)]
    sha = release.to_revision.gateway_policy.sha256
    assert shown.startswith('<dd id="gateway-policy">r3: gw-1 <span class="badge warn">unknown')
    assert f'r4: v2 <code title="{sha}">{sha[:19]}…</code>' in shown
