"""The attacks on the evidence bundle that once verified, each reproduced.

A zip may hold two entries of one name: Python's zipfile (and so the verifier) read
the last, `unzip` asks which to keep, and an extractor reading local headers may
write yet another. The exporter now writes each name once, and the verifier refuses
any zip whose entries an extractor could read otherwise than it checked them; a
verification against the key the bundle carries no longer exits 0.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import stat
import subprocess
import sys
import warnings
import zipfile
from pathlib import Path

import pytest
import time_machine

from ledger import signing
from ledger.chain import canonical_json
from ledger.models import Event
from tests.ledger.evidence.conftest import import_file, sample_asset, sample_runtime
from tests.ledger.factories import RevisionFactory, ServiceFactory
from tests.ledger.test_exports import OCT, VERIFIER, _export, _resign, _rewrite

pytestmark = pytest.mark.django_db

EXPORTED_AT = dt.datetime(2026, 11, 3, 9, 30, 12, tzinfo=dt.UTC)


@pytest.fixture
def bundle(team, tmp_path) -> Path:
    """October's bundle, with one raw load-test file behind reports of two revisions."""
    with time_machine.travel(OCT + dt.timedelta(days=2), tick=False):
        service = ServiceFactory(slug="kb-assistant", team=team)
        asset, runtime = sample_asset(team), sample_runtime(team)
        for policy in ("gw-1", "gw-2"):
            revision = RevisionFactory(
                service=service, model_asset=asset, runtime=runtime, gateway_policy_version=policy
            )
            import_file(revision, "vllm", "vllm_c2_n20_detailed.json")
    with time_machine.travel(EXPORTED_AT, tick=False):
        return _export(tmp_path)


@pytest.fixture
def key_file(tmp_path) -> Path:
    path = tmp_path / "ledger-key.pem"
    path.write_text(signing.public_key_pem())
    return path


def _verify(bundle: Path, *options: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(VERIFIER), str(bundle), *options],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _members(bundle: Path) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(bundle) as archive:
        return [(info.filename, archive.read(info)) for info in archive.infolist()]


def _write_zip(bundle: Path, members: list[tuple[str, bytes]]) -> None:
    """Entries in this order, duplicates kept (zipfile warns, and writes them)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with zipfile.ZipFile(bundle, "w") as target:
            for name, data in members:
                target.writestr(name, data)


def _rename_entry(bundle: Path, old: str, new: str, *, central: bool = True) -> None:
    """Rename an entry in place, in its local header and (unless `central` is False) in
    the central directory: what no zip library writes, and a hostile bundle may."""
    assert len(old.encode()) == len(new.encode())
    parts = bundle.read_bytes().split(old.encode())
    assert len(parts) == 3, "the name appears once in a local header, once in the directory"
    renamed = parts[0] + new.encode() + parts[1] + (new if central else old).encode() + parts[2]
    bundle.write_bytes(renamed)


# ---------------------------------------------------------------- the exporter


def test_the_exporter_writes_each_file_once_evidence_by_digest(bundle, key_file):
    names = [name for name, _ in _members(bundle)]
    assert len(names) == len(set(names))
    evidence = [n for n in names if n.startswith("evidence/")]
    assert len(evidence) == 1  # two reports, one raw file
    assert _verify(bundle, "--key", str(key_file)).returncode == 0


def test_entries_unpack_as_readable_files_dated_with_the_export(bundle, tmp_path):
    with zipfile.ZipFile(bundle) as archive:
        infos = archive.infolist()
    for info in infos:
        assert info.create_system == 3
        assert info.external_attr >> 16 == 0o100644, info.filename
        assert info.date_time[:5] == (2026, 11, 3, 9, 30), info.filename
    # unzip reads the exact moment from the extended timestamp, and the mode.
    out = tmp_path / "unpacked"
    result = subprocess.run(
        ["unzip", "-q", str(bundle), "-d", str(out)],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
        env={**os.environ, "TZ": "Asia/Shanghai"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    files = [p for p in out.rglob("*") if p.is_file()]
    assert len(files) == len(infos)
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path
        assert int(path.stat().st_mtime) == int(EXPORTED_AT.timestamp()), path


# ---------------------------------------------------------------- one entry per name


def test_a_forged_record_placed_before_the_genuine_one_is_refused(bundle, key_file):
    members = _members(bundle)
    forged = ("records/releases.jsonl", b'{"id": 1, "state": "approved"}\n')
    at = next(i for i, (name, _) in enumerate(members) if name == "records/releases.jsonl")
    _write_zip(bundle, [*members[:at], forged, *members[at:]])

    result = _verify(bundle, "--key", str(key_file))

    assert result.returncode == 1, result.stdout
    assert "NOT VERIFIED: records/releases.jsonl: in the bundle twice" in result.stdout


def test_a_changed_first_copy_of_a_duplicated_evidence_file_is_refused(bundle, key_file):
    members = _members(bundle)
    name, data = next(m for m in members if m[0].startswith("evidence/"))
    changed = (name, data.replace(b'"', b"'", 1))
    at = members.index((name, data))
    _write_zip(bundle, [*members[:at], changed, *members[at:]])

    result = _verify(bundle, "--key", str(key_file))

    assert result.returncode == 1
    assert f"{name}: in the bundle twice" in result.stdout


def test_a_byte_flipped_in_a_shadowed_copy_is_refused(bundle, key_file):
    members = _members(bundle)
    name, data = next(m for m in members if m[0] == "chain/segment.jsonl")
    flipped = bytearray(data)
    flipped[len(flipped) // 2] ^= 0x20
    at = members.index((name, data))
    _write_zip(bundle, [*members[:at], (name, bytes(flipped)), *members[at:]])

    result = _verify(bundle, "--key", str(key_file))

    assert result.returncode == 1
    assert "chain/segment.jsonl: in the bundle twice" in result.stdout


def test_names_equal_but_for_case_are_refused(bundle, key_file):
    members = _members(bundle)
    _write_zip(bundle, [*members, ("Records/Releases.jsonl", b"{}\n")])

    result = _verify(bundle, "--key", str(key_file))

    assert result.returncode == 1
    assert "Records/Releases.jsonl: in the bundle beside 'records/releases.jsonl'" in result.stdout


def test_an_entry_the_statement_does_not_name_is_refused(bundle, key_file):
    _write_zip(bundle, [*_members(bundle), ("records/extra.jsonl", b"{}\n")])

    result = _verify(bundle, "--key", str(key_file))

    assert result.returncode == 1
    assert "records/extra.jsonl: in the bundle but not in the signed statement" in result.stdout


@pytest.mark.parametrize(
    ("new", "problem"),
    [
        ("/ecords/releases.jsonl", "is an absolute path"),
        ("../ords/releases.jsonl", "climbs out with '..'"),
        ("records\\releases.jsonl", "has a backslash"),
        ("records/releases\x00jsonl", "has a NUL character"),
        ("records//eleases.jsonl", "has an empty or '.' part"),
    ],
    ids=["absolute", "dot-dot", "backslash", "nul", "empty-part"],
)
def test_hostile_entry_names_are_refused(bundle, key_file, new, problem):
    _rename_entry(bundle, "records/releases.jsonl", new)

    result = _verify(bundle, "--key", str(key_file))

    assert result.returncode == 1, result.stdout + result.stderr
    assert f"the entry's name {problem}" in result.stdout
    assert "Traceback" not in result.stderr


def test_a_local_header_that_names_another_file_is_refused(bundle, key_file):
    _rename_entry(bundle, "records/releases.jsonl", "records/releasez.jsonl", central=False)

    result = _verify(bundle, "--key", str(key_file))

    assert result.returncode == 1, result.stdout + result.stderr
    assert (
        "records/releases.jsonl: its local header names it 'records/releasez.jsonl'"
        in result.stdout
    )


@pytest.mark.parametrize(
    ("system", "attributes", "refusal"),
    [
        (3, (stat.S_IFLNK | 0o777) << 16, "not a regular file (mode 120777)"),
        (0, 0x10, "a directory entry"),  # MS-DOS's directory attribute, no trailing slash
    ],
    ids=["symbolic-link", "dos-directory"],
)
def test_an_entry_that_is_no_plain_file_is_refused(bundle, key_file, system, attributes, refusal):
    members = _members(bundle)
    with zipfile.ZipFile(bundle, "w") as target:
        for name, data in members:
            target.writestr(name, data)
        odd = zipfile.ZipInfo("records/odd.jsonl")
        odd.create_system = system
        odd.external_attr = attributes
        target.writestr(odd, "/etc/passwd")

    result = _verify(bundle, "--key", str(key_file))

    assert result.returncode == 1
    assert f"records/odd.jsonl: {refusal}" in result.stdout


# ---------------------------------------------------------------- a key the auditor trusts


def test_without_a_key_nothing_is_verified(bundle):
    result = _verify(bundle)

    assert result.returncode == 2
    assert "no key given" in result.stderr
    assert "verified:" not in result.stdout


def test_a_bundle_resigned_with_the_attackers_key_never_exits_0(bundle, tmp_path, key_file):
    members = dict(_members(bundle))
    lines = members["records/releases.jsonl"].splitlines(keepends=True)
    _rewrite(bundle, {"records/releases.jsonl": b"".join(lines[1:])})
    attacker = _resign(bundle, tmp_path)
    _rewrite(bundle, {"signing-key.pem": attacker.read_bytes()})

    trusting = _verify(bundle, "--trust-bundle-key")
    pinned = _verify(bundle, "--key", str(key_file))

    # Consistent with the key it carries: exit 3 and a warning, never 0.
    assert trusting.returncode == 3, trusting.stdout + trusting.stderr
    assert "key NOT pinned" in trusting.stdout
    assert "WARNING: checked only against the key inside the bundle" in trusting.stderr
    assert "fingerprint is on the Audit page" in trusting.stderr
    # Against the ledger's key: named.
    assert pinned.returncode == 1
    assert "no signature in attestation.dsse.json verifies with the key given" in pinned.stdout


def test_the_verifier_prints_the_fingerprint_the_ledger_publishes(bundle, key_file):
    result = _verify(bundle, "--key", str(key_file))

    assert result.returncode == 0
    assert f"key pinned ({signing.public_key().keyid})" in result.stdout


# ---------------------------------------------------------------- the signatures it checks


def _statement(bundle: Path) -> dict:
    with zipfile.ZipFile(bundle) as archive:
        envelope = json.loads(archive.read("attestation.dsse.json"))
    return json.loads(base64.b64decode(envelope["payload"]))


def test_the_ledger_vouches_for_the_signatures_it_checked_and_the_rest_are_checked_here(
    bundle, key_file
):
    mark = _statement(bundle)["predicate"]["signatures_checked_through"]
    head = Event.objects.order_by("-sequence").first()

    quick = _verify(bundle, "--key", str(key_file))
    every = _verify(bundle, "--key", str(key_file), "--all-signatures")

    # The export's checkpoint found every signature valid up to the head it saw.
    assert mark == {"sequence": head.sequence, "hash": head.hash}
    assert quick.returncode == every.returncode == 0, quick.stdout + every.stdout
    assert "found valid by the ledger through" in quick.stdout
    assert "each event's signature checked" in every.stdout


def test_an_unsigned_event_the_statement_vouches_for_is_named_when_each_is_checked(
    bundle, tmp_path
):
    lines = _segment_lines(bundle)
    record = json.loads(lines[2])
    record["signature"] = ""
    lines[2] = (canonical_json(record) + "\n").encode()
    _rewrite(bundle, {"chain/segment.jsonl": b"".join(lines)})
    keys = _resign(bundle, tmp_path)  # a signer who vouches for what it did not check

    result = _verify(bundle, "--key", str(keys), "--all-signatures")

    assert result.returncode == 1
    assert f"(event #{record['sequence']}): it carries no signature" in result.stdout


def test_a_mark_that_names_another_event_than_the_segments_is_refused(bundle, tmp_path):
    statement = _statement(bundle)
    inside = json.loads(_segment_lines(bundle)[2])
    statement["predicate"]["signatures_checked_through"] = {
        "sequence": inside["sequence"],
        "hash": "f" * 64,
    }
    keys = _resign(bundle, tmp_path, statement=statement)

    result = _verify(bundle, "--key", str(keys))

    assert result.returncode == 1
    assert (
        f"signatures_checked_through names event #{inside['sequence']} with another hash"
        in result.stdout
    )


def _segment_lines(bundle: Path) -> list[bytes]:
    with zipfile.ZipFile(bundle) as archive:
        return archive.read("chain/segment.jsonl").splitlines(keepends=True)
