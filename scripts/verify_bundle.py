#!/usr/bin/env python3
"""Check an Inference Release Ledger evidence bundle offline, without the server.

    python scripts/verify_bundle.py BUNDLE.zip --key ledger-signing-key.pem

Needs only Python 3.11 and the `cryptography` package. It checks, in order, and names
the first thing that does not match:
1. the DSSE envelope's Ed25519 signature, with the public key you pinned (--key; without
   it, the key inside the bundle is used and the result says it was not pinned);
2. that every file in the bundle is a subject of the signed in-toto Statement with the
   same sha256, and every subject is in the bundle (the manifest is a subject too);
3. the chain segment: each event's hash recomputed from its fields, each event linked to
   the one before it, sequence numbers contiguous;
4. that the exported event records are the chain's events, and the chain head.
Exit status: 0 verified, 1 a mismatch (printed), 2 the bundle could not be read.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

GENESIS_HASH = "0" * 64
PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
UNSIGNED = {"attestation.dsse.json", "signing-key.pem"}
HASHED_FIELDS = (
    "sequence",
    "service",
    "created_at",
    "actor",
    "action",
    "subject_type",
    "subject_id",
    "payload",
    "prev_hash",
)


class Mismatch(Exception):
    """The first thing in the bundle that does not match."""


class Unreadable(Exception):
    """Not a bundle at all: not a zip file, or not readable."""


def canonical_json(data: Any) -> str:
    return json.dumps(
        data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def event_hash(record: dict[str, Any]) -> str:
    body = canonical_json({name: record.get(name) for name in HASHED_FIELDS})
    return hashlib.sha256(body.encode()).hexdigest()


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding: what the signature covers."""
    kind = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def verify_signature(envelope: dict[str, Any], public_key_pem: bytes) -> dict[str, Any]:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    from cryptography.hazmat.primitives.serialization import load_pem_public_key

    key = load_pem_public_key(public_key_pem)
    if not isinstance(key, Ed25519PublicKey):
        raise Mismatch("signature: the key given is not an Ed25519 public key")
    if envelope.get("payloadType") != PAYLOAD_TYPE:
        raise Mismatch(
            f"signature: payload type is {envelope.get('payloadType')!r}, not {PAYLOAD_TYPE!r}"
        )
    try:
        payload = base64.b64decode(envelope["payload"], validate=True)
        signatures = [base64.b64decode(s["sig"], validate=True) for s in envelope["signatures"]]
    except (KeyError, TypeError, ValueError) as error:
        raise Mismatch(f"signature: the envelope is malformed ({error})") from None
    message = pae(PAYLOAD_TYPE, payload)
    for signature in signatures:
        try:
            key.verify(signature, message)
        except InvalidSignature:
            continue
        statement = json.loads(payload)
        if statement.get("_type") != STATEMENT_TYPE:
            raise Mismatch(f"statement: _type is {statement.get('_type')!r}, not {STATEMENT_TYPE}")
        return statement
    raise Mismatch("signature: no signature in attestation.dsse.json verifies with the key given")


def _sha256(archive: zipfile.ZipFile, name: str) -> str:
    digest = hashlib.sha256()
    with archive.open(name) as member:
        for chunk in iter(lambda: member.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def verify_files(archive: zipfile.ZipFile, statement: dict[str, Any]) -> None:
    signed = {s["name"]: s["digest"]["sha256"] for s in statement.get("subject", [])}
    present = [n for n in archive.namelist() if n not in UNSIGNED and not n.endswith("/")]
    if "manifest.json" in present and _sha256(archive, "manifest.json") != signed.get(
        "manifest.json"
    ):
        raise Mismatch(
            "manifest.json: differs from the one the statement signed (the manifest was edited "
            "after export; its file digests cannot be trusted)"
        )
    for name in present:
        if name not in signed:
            raise Mismatch(f"{name}: in the bundle but not in the signed statement")
        actual = _sha256(archive, name)
        if actual != signed[name]:
            raise Mismatch(
                f"{name}: sha256 {actual[:16]}… differs from the signed statement's "
                f"{signed[name][:16]}… (the file was changed after export)"
            )
    for name in signed:
        if name not in present:
            raise Mismatch(f"{name}: in the signed statement but missing from the bundle")


def _lines(archive: zipfile.ZipFile, name: str) -> Iterator[tuple[int, dict[str, Any]]]:
    with archive.open(name) as member:
        for number, line in enumerate(member, start=1):
            if line.strip():
                yield number, json.loads(line)


def verify_segment(archive: zipfile.ZipFile) -> tuple[int | None, int | None, dict[int, str]]:
    """(first, last) sequence of the period and each event's hash."""
    before: dict[str, Any] | None = None
    hashes: dict[int, str] = {}
    first = last = None
    for number, record in _lines(archive, "chain/segment.jsonl"):
        where = f"chain/segment.jsonl line {number} (event #{record.get('sequence')})"
        if before is None:
            genesis = record.get("genesis") and record.get("hash") == GENESIS_HASH
            if not genesis and event_hash(record) != record.get("hash"):
                raise Mismatch(f"{where}: its content does not match its hash")
            before = record
            continue
        expected = before["sequence"] + 1
        if record.get("sequence") != expected:
            if isinstance(record.get("sequence"), int) and record["sequence"] < expected:
                raise Mismatch(
                    f"{where}: comes after event #{before['sequence']}; the events are out of order"
                )
            raise Mismatch(
                f"{where}: event #{expected} is missing (the sequence jumps from "
                f"#{before['sequence']} to #{record.get('sequence')})"
            )
        if record.get("prev_hash") != before["hash"]:
            raise Mismatch(
                f"{where}: prev_hash does not match the hash of event #{before['sequence']}"
            )
        if event_hash(record) != record.get("hash"):
            raise Mismatch(f"{where}: its content does not match its hash")
        hashes[record["sequence"]] = record["hash"]
        first = record["sequence"] if first is None else first
        last = record["sequence"]
        before = record
    return first, last, hashes


def verify_records(archive: zipfile.ZipFile, hashes: dict[int, str]) -> int:
    count = 0
    for number, record in _lines(archive, "records/events.jsonl"):
        if hashes.get(record.get("sequence")) != record.get("hash"):
            raise Mismatch(
                f"records/events.jsonl line {number}: event #{record.get('sequence')} is not "
                "the chain segment's event of that number"
            )
        count += 1
    return count


def verify(path: Path, key_pem: bytes | None) -> str:
    """A one-line summary when the bundle verifies; raises Mismatch otherwise."""
    try:
        archive = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as error:
        raise Unreadable(f"{path}: not a readable zip file ({error})") from None
    with archive:
        names = set(archive.namelist())
        for required in ("attestation.dsse.json", "manifest.json", "chain/segment.jsonl"):
            if required not in names:
                raise Mismatch(f"{required}: missing from the bundle")
        pinned = key_pem is not None
        if key_pem is None:
            if "signing-key.pem" not in names:
                raise Mismatch("signing-key.pem: missing, and no --key was given")
            key_pem = archive.read("signing-key.pem")
        statement = verify_signature(json.loads(archive.read("attestation.dsse.json")), key_pem)
        verify_files(archive, statement)
        first, last, hashes = verify_segment(archive)
        records = verify_records(archive, hashes) if "records/events.jsonl" in names else 0
        head = statement.get("predicate", {}).get("chain_head", {})
        if last is not None and head.get("sequence") == last and head.get("hash") != hashes[last]:
            raise Mismatch(f"chain head: event #{last} differs from the signed chain head")
        if last is not None and isinstance(head.get("sequence"), int) and last > head["sequence"]:
            raise Mismatch(
                f"chain head: the segment ends at #{last}, after the signed head #{head['sequence']}"
            )
    span = f"events #{first} to #{last}" if first is not None else "no events"
    key_note = "key pinned" if pinned else "key NOT pinned (taken from the bundle; pass --key)"
    return (
        f"verified: {len(statement['subject'])} files match the signed statement, {span} "
        f"recomputed and linked, {records} exported records in the chain, chain head "
        f"#{head.get('sequence')}; {key_note}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bundle", type=Path)
    parser.add_argument(
        "--key", type=Path, help="the ledger's public key (PEM), pinned out of band"
    )
    args = parser.parse_args(argv)
    try:
        key = args.key.read_bytes() if args.key else None
    except OSError as error:
        print(f"cannot read the key: {error}", file=sys.stderr)
        return 2
    try:
        print(verify(args.bundle, key))
    except Unreadable as error:
        print(f"cannot read the bundle: {error}", file=sys.stderr)
        return 2
    except Mismatch as error:
        print(f"NOT VERIFIED: {error}")
        return 1
    except (ValueError, KeyError) as error:
        print(f"NOT VERIFIED: the bundle is malformed ({error})")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
