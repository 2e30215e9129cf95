#!/usr/bin/env python3
"""Check an Inference Release Ledger evidence bundle offline, without the server.

    python scripts/verify_bundle.py BUNDLE.zip --key ledger-signing-key.pem [--jobs N]

Needs only Python 3.11 and the `cryptography` package. It checks, in order, and names
the first thing that does not match:
1. the zip itself: each name once (whatever its case or Unicode form), no absolute or
   `..` path, backslash or NUL, only regular files, and the name in each entry's local
   header the one the central directory gives — so that what `unzip` extracts is what
   was checked;
2. the DSSE envelope's Ed25519 signature, with a public key you pinned (--key, repeated
   for the retired keys of a rotation; a file may hold several PEM blocks);
3. that every entry in the bundle is a subject of the signed in-toto Statement with the
   same sha256, and every subject is in the bundle (the manifest is a subject too);
4. the chain segment: each event's hash recomputed from its fields, each event linked to
   the one before it, sequence numbers contiguous, and each event's own signature by a
   pinned key (an event the application did not sign was not written by it) — those
   after the event up to which the signed statement says the ledger found every
   signature valid (`signatures_checked_through`, the export's checkpoint), or every
   one with --all-signatures;
5. that the exported event records are the chain's events, and the chain head;
6. that each gateway policy version the records carry with a document hashes to the
   sha256 its record names, and that the bundle's copy of it (`gateway-policies/`) is
   that same document.
Exit status: 0 verified with a pinned key, 1 a mismatch (printed), 2 the bundle could
not be read (or no key was given), 3 consistent with the key the bundle carries but not
checked against one you trust (--trust-bundle-key: anyone who re-signs a bundle can put
their own key in it).

The two large files (the segment and the event records) are read once each: their
sha256 is taken as they are decompressed, and blocks of their lines are parsed and
hashed by --jobs processes (default: one per CPU). A file whose digest differs from the
signed one is named as changed, whatever its lines say.
"""

from __future__ import annotations

import argparse
import base64
import functools
import hashlib
import json
import os
import re
import stat
import struct
import sys
import unicodedata
import zipfile
import zlib
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

GENESIS_HASH = "0" * 64
PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
UNSIGNED = {"attestation.dsse.json", "signing-key.pem"}
SEGMENT = "chain/segment.jsonl"
RECORDS = "records/events.jsonl"
POLICY_RECORDS = "records/gateway_policies.jsonl"
BLOCK_BYTES = 4 << 20
EVENT_SIGNATURE_CONTEXT = b"inference-release-ledger/event/v1 "
PEM_BLOCK = re.compile(rb"-----BEGIN PUBLIC KEY-----.+?-----END PUBLIC KEY-----", re.DOTALL)
EXIT_VERIFIED, EXIT_MISMATCH, EXIT_UNREADABLE, EXIT_UNPINNED = 0, 1, 2, 3
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


# One encoder for every event: json.dumps would build a new one per call.
_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


_DECODER = json.JSONDecoder()


def canonical_json(data: Any) -> str:
    return _CANONICAL.encode(data)


def event_hash(record: dict[str, Any]) -> str:
    body = canonical_json({name: record.get(name) for name in HASHED_FIELDS})
    return hashlib.sha256(body.encode()).hexdigest()


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding: what the signature covers."""
    kind = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


# ---------------------------------------------------------------- keys


def key_id(key: Any) -> str:
    """A public key's fingerprint as the ledger names it (securesystemslib's key id:
    sha256 of its canonical description), shown on the Audit page."""
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    raw = key.public_bytes(Encoding.Raw, PublicFormat.Raw).hex()
    described = {"keytype": "ed25519", "keyval": {"public": raw}, "scheme": "ed25519"}
    return hashlib.sha256(canonical_json(described).encode()).hexdigest()


@functools.cache
def load_keys(pems: tuple[bytes, ...]) -> dict[str, Any]:
    """Every Ed25519 public key in the PEM texts, by fingerprint."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    from cryptography.hazmat.primitives.serialization import load_pem_public_key

    keys = {}
    for text in pems:
        blocks = PEM_BLOCK.findall(text)
        if not blocks:
            raise Mismatch("signature: the key given holds no PEM public key")
        for block in blocks:
            try:
                key = load_pem_public_key(block)
            except ValueError as error:
                raise Mismatch(f"signature: the key given cannot be read ({error})") from None
            if not isinstance(key, Ed25519PublicKey):
                raise Mismatch("signature: the key given is not an Ed25519 public key")
            keys[key_id(key)] = key
    return keys


def verify_signature(envelope: dict[str, Any], keys: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The signed statement and the fingerprint of the key that signed it."""
    from cryptography.exceptions import InvalidSignature

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
        for fingerprint, key in keys.items():
            try:
                key.verify(signature, message)
            except InvalidSignature:
                continue
            statement = json.loads(payload)
            if statement.get("_type") != STATEMENT_TYPE:
                raise Mismatch(
                    f"statement: _type is {statement.get('_type')!r}, not {STATEMENT_TYPE}"
                )
            return statement, fingerprint
    raise Mismatch("signature: no signature in attestation.dsse.json verifies with the key given")


def event_signature_problem(record: dict[str, Any], keys: dict[str, Any]) -> str | None:
    """Why an event's own signature does not vouch for its hash, or None."""
    from cryptography.exceptions import InvalidSignature

    signature, fingerprint, own = record.get("signature"), record.get("key_id"), record.get("hash")
    if not signature or not isinstance(signature, str):
        return (
            "it carries no signature: the application did not write it "
            "(a row inserted with the database's password?)"
        )
    key = keys.get(fingerprint) if isinstance(fingerprint, str) else None
    if key is None:
        return (
            f"it is signed by key {str(fingerprint)[:16]}…, which is not a key you pinned "
            "(after a rotation, pass the retired keys with --key too)"
        )
    try:
        key.verify(
            base64.b64decode(signature, validate=True),
            EVENT_SIGNATURE_CONTEXT + str(own).encode(),
        )
    except (InvalidSignature, ValueError):
        return f"its signature does not verify with key {fingerprint[:16]}…"
    return None


# ---------------------------------------------------------------- the zip itself

_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")


def _name_problem(name: str) -> str | None:
    if "\0" in name:
        return "has a NUL character"
    if "\\" in name:
        return "has a backslash"
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        return "is an absolute path"
    parts = name.split("/")
    if ".." in parts:
        return "climbs out with '..'"
    if any(part in ("", ".") for part in parts):
        return "has an empty or '.' part"
    return None


def check_entries(archive: zipfile.ZipFile) -> None:
    """Each entry a regular file named once, safely, the same in its local header as in
    the central directory: an extractor then writes exactly the files that were checked
    (Python's zipfile maps a name to its last entry, `unzip` asks which to keep)."""
    seen: dict[str, str] = {}
    for info in archive.infolist():
        name = info.orig_filename
        shown = repr(name)[1:-1]
        if problem := _name_problem(name):
            raise Mismatch(f"{shown}: the entry's name {problem}")
        # A trailing slash, or MS-DOS's directory attribute.
        if info.is_dir() or info.external_attr & 0x10:
            raise Mismatch(f"{shown}: a directory entry (a bundle holds only files)")
        # A Unix mode of no type (Python's zipfile writes 0600) is a file to extractors.
        kind = stat.S_IFMT(info.external_attr >> 16)
        if info.create_system == 3 and kind not in (0, stat.S_IFREG):
            raise Mismatch(f"{shown}: not a regular file (mode {info.external_attr >> 16:o})")
        folded = unicodedata.normalize("NFC", name).casefold()
        if folded in seen:
            twice = "twice" if seen[folded] == name else f"beside {seen[folded]!r}"
            raise Mismatch(
                f"{shown}: in the bundle {twice} — a second entry of one name "
                "(an extractor would write one over the other)"
            )
        seen[folded] = name
        _check_local_header(archive, info, shown)


def _check_local_header(archive: zipfile.ZipFile, info: zipfile.ZipInfo, shown: str) -> None:
    fp = archive.fp
    assert fp is not None
    fp.seek(info.header_offset)
    header = fp.read(_LOCAL_HEADER.size)
    if len(header) != _LOCAL_HEADER.size or header[:4] != b"PK\x03\x04":
        raise Mismatch(f"{shown}: its local header is missing or damaged")
    fields = _LOCAL_HEADER.unpack(header)
    flags, name_length = fields[3], fields[10]
    raw = fp.read(name_length)
    local = raw.decode("utf-8" if flags & 0x800 else "cp437", errors="replace")
    if local != info.orig_filename:
        raise Mismatch(
            f"{shown}: its local header names it {local!r} (an extractor reading the "
            "local headers would write another file)"
        )


def _sha256(archive: zipfile.ZipFile, name: str) -> str:
    digest = hashlib.sha256()
    with archive.open(name) as member:
        for chunk in iter(lambda: member.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def signed_digests(statement: dict[str, Any]) -> dict[str, str]:
    return {s["name"]: s["digest"]["sha256"] for s in statement.get("subject", [])}


def verify_files(
    archive: zipfile.ZipFile, statement: dict[str, Any], *, streamed: frozenset[str] = frozenset()
) -> None:
    """Every file against the signed statement, except those in `streamed`, whose digests
    are taken while their lines are read (`_stream`)."""
    signed = signed_digests(statement)
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
        if name not in streamed:
            _check_digest(name, _sha256(archive, name), signed[name])
    for name in signed:
        if name not in present:
            raise Mismatch(f"{name}: in the signed statement but missing from the bundle")


def _check_digest(name: str, actual: str, signed: str) -> None:
    if actual != signed:
        raise Mismatch(
            f"{name}: sha256 {actual[:16]}… differs from the signed statement's "
            f"{signed[:16]}… (the file was changed after export)"
        )


def check_gateway_policies(archive: zipfile.ZipFile, names: set[str]) -> int:
    """Each known policy version's record against its document: the record's `document`
    cell (canonical JSON) must hash to its `sha256`, and the bundle must hold the same
    text at `gateway-policies/<service>-<label>.json`. Answers how many were checked."""
    if POLICY_RECORDS not in names:
        return 0
    checked = 0
    for number, line in enumerate(archive.read(POLICY_RECORDS).decode().splitlines(), 1):
        record = json.loads(line)
        if not record.get("known"):
            continue
        where = f"{POLICY_RECORDS} line {number} ({record.get('service')} {record.get('label')})"
        document = record.get("document")
        if not isinstance(document, str):
            raise Mismatch(f"{where}: a known version without its document")
        own = "sha256:" + hashlib.sha256(document.encode()).hexdigest()
        if own != record.get("sha256"):
            raise Mismatch(
                f"{where}: the document hashes to {own[:23]}…, not the recorded "
                f"{str(record.get('sha256'))[:23]}…"
            )
        path = f"gateway-policies/{record.get('service')}-{record.get('label')}.json"
        if path not in names:
            raise Mismatch(f"{where}: its document {path} is missing from the bundle")
        if archive.read(path).decode() != document:
            raise Mismatch(f"{path}: differs from the document its record carries")
        checked += 1
    return checked


# ---------------------------------------------------------------- reading the large files


def _blocks(member: Any, digest: Any, size: int) -> Iterator[tuple[int, bytes]]:
    """(number of its first line, whole lines) in blocks of about `size` bytes; every
    byte passes through `digest` as it is read."""
    number, rest = 1, b""
    while chunk := member.read(size):
        digest.update(chunk)
        data = rest + chunk
        cut = data.rfind(b"\n") + 1
        if cut:
            yield number, data[:cut]
            number += data.count(b"\n", 0, cut)
        rest = data[cut:]
    if rest:
        yield number, rest


def _records(name: str, number: int, data: bytes) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        text = data.decode()
    except UnicodeDecodeError as error:
        line = number + data.count(b"\n", 0, error.start)
        raise Mismatch(f"{name} line {line}: not UTF-8 text") from None
    for offset, line in enumerate(text.split("\n")):
        if not line.strip():
            continue
        try:
            record, end = _DECODER.raw_decode(line)
            if extra := line[end:].lstrip():
                raise ValueError(f"extra data at column {len(line) - len(extra) + 1}")
        except ValueError as error:
            raise Mismatch(f"{name} line {number + offset}: not JSON ({error})") from None
        if not isinstance(record, dict):
            raise Mismatch(f"{name} line {number + offset}: not a JSON object")
        yield number + offset, record


# ---------------------------------------------------------------- the chain segment

# A segment event as the checks need it: line number, sequence, prev_hash, hash, whether
# the hash recomputed from its fields matches, whether it is the genesis marker, and
# what is wrong with its signature (None when it is good).
Entry = tuple[int, int, Any, Any, bool, bool, str | None]


def _entry(
    number: int, record: dict[str, Any], keys: dict[str, Any], signatures_from: int
) -> Entry:
    sequence = record.get("sequence")
    if not isinstance(sequence, int) or isinstance(sequence, bool):
        raise Mismatch(f"{SEGMENT} line {number}: sequence {sequence!r} is not a whole number")
    own = record.get("hash")
    genesis = bool(record.get("genesis")) and own == GENESIS_HASH
    matches = genesis or event_hash(record) == own
    checked = matches and not genesis and sequence >= signatures_from
    unsigned = event_signature_problem(record, keys) if checked else None
    return number, sequence, record.get("prev_hash"), own, matches, genesis, unsigned


def _own_problem(entry: Entry) -> str | None:
    """What is wrong with an event in itself: its hash, then its signature."""
    number, sequence, *_, matches, _, unsigned = entry
    where = f"{SEGMENT} line {number} (event #{sequence})"
    if not matches:
        return f"{where}: its content does not match its hash"
    if unsigned:
        return f"{where}: {unsigned}"
    return None


def _link_problem(before: Entry, entry: Entry) -> str | None:
    """What is wrong with `entry` following `before`, in the words an auditor reads."""
    number, sequence, prev = entry[:3]
    where = f"{SEGMENT} line {number} (event #{sequence})"
    expected = before[1] + 1
    if sequence != expected:
        if sequence < expected:
            return f"{where}: comes after event #{before[1]}; the events are out of order"
        return (
            f"{where}: event #{expected} is missing (the sequence jumps from "
            f"#{before[1]} to #{sequence})"
        )
    if prev != before[3]:
        return f"{where}: prev_hash does not match the hash of event #{before[1]}"
    return _own_problem(entry)


@dataclass(frozen=True)
class SegmentBlock:
    """One block of the segment, checked within itself; the caller links it to the
    block before and stops at its problem."""

    first: Entry | None
    last: Entry | None
    problem: str | None
    hashes: str  # every event's hash, in order, concatenated (64 characters each)


def check_segment_block(
    pems: tuple[bytes, ...], signatures_from: int, number: int, data: bytes
) -> SegmentBlock:
    """`pems`: the pinned keys, as text (a worker process loads them once); each event's
    signature is checked from `signatures_from` on."""
    keys = load_keys(pems)
    first = before = None
    hashes = []
    for line, record in _records(SEGMENT, number, data):
        entry = _entry(line, record, keys, signatures_from)
        if before is None:
            first = entry
        elif problem := _link_problem(before, entry):
            return SegmentBlock(first, before, problem, "".join(hashes))
        hashes.append(entry[3] if isinstance(entry[3], str) and len(entry[3]) == 64 else "?" * 64)
        before = entry
    return SegmentBlock(first, before, None, "".join(hashes))


@dataclass
class Segment:
    """The segment as verified: its first entry (the event before the period, or the
    genesis marker) and every event's hash from there on, by sequence."""

    start: int | None = None
    hashes: str = ""

    @property
    def period(self) -> tuple[int | None, int | None]:
        count = len(self.hashes) // 64
        if self.start is None or count < 2:
            return None, None
        return self.start + 1, self.start + count - 1

    def hash_at(self, sequence: int) -> str | None:
        """The hash of any event of the segment, the one before the period included."""
        if self.start is None or not self.start <= sequence < self.start + len(self.hashes) // 64:
            return None
        at = (sequence - self.start) * 64
        return self.hashes[at : at + 64]

    def hash_of(self, sequence: Any) -> str | None:
        """The hash of an event inside the period (not the one before it)."""
        first, last = self.period
        if first is None or not isinstance(sequence, int) or not first <= sequence <= last:
            return None
        at = (sequence - self.start) * 64
        return self.hashes[at : at + 64]


def _read_segment(blocks: Iterator[SegmentBlock]) -> Segment:
    segment = Segment()
    parts: list[str] = []
    before: Entry | None = None
    for block in blocks:
        if block.first is None:
            continue
        if before is None:
            if problem := _own_problem(block.first):
                raise Mismatch(problem)
            segment.start = block.first[1]
        elif problem := _link_problem(before, block.first):
            raise Mismatch(problem)
        if block.problem:
            raise Mismatch(block.problem)
        parts.append(block.hashes)
        before = block.last
    segment.hashes = "".join(parts)
    return segment


# ---------------------------------------------------------------- the exported records


def read_records_block(number: int, data: bytes) -> list[tuple[int, Any, Any]]:
    return [(n, r.get("sequence"), r.get("hash")) for n, r in _records(RECORDS, number, data)]


def _check_records(blocks: Iterator[list[tuple[int, Any, Any]]], segment: Segment) -> int:
    count = 0
    for block in blocks:
        for number, sequence, own in block:
            if segment.hash_of(sequence) != own:
                raise Mismatch(
                    f"{RECORDS} line {number}: event #{sequence} is not "
                    "the chain segment's event of that number"
                )
        count += len(block)
    return count


# ---------------------------------------------------------------- reading in parallel

T = TypeVar("T")
R = TypeVar("R")


class _Inline(Executor):
    """An executor that runs each call at once, in this process (--jobs 1)."""

    def submit(self, fn: Callable[..., R], /, *args: Any, **kwargs: Any) -> Future[R]:
        future: Future[R] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as error:  # handed to the caller through result()
            future.set_exception(error)
        return future


def _stream(
    archive: zipfile.ZipFile,
    name: str,
    signed: str,
    work: Callable[[int, bytes], T],
    judge: Callable[[Iterator[T]], R],
    pool: Executor,
    jobs: int,
    block_bytes: int,
) -> R:
    """Read `name` once: its sha256 as it is decompressed, its blocks of lines handed to
    `work` in the pool (a few at a time, so memory stays flat) and the results, in
    order, to `judge`. A changed file is named as such before anything its lines say."""
    digest = hashlib.sha256()
    failure: Mismatch | None = None
    with archive.open(name) as member:
        blocks = _blocks(member, digest, block_bytes)

        def results() -> Iterator[T]:
            pending: deque[Future[T]] = deque()
            for number, data in blocks:
                pending.append(pool.submit(work, number, data))
                if len(pending) > 2 * jobs:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()

        try:
            verdict = judge(results())
        except Mismatch as error:
            failure = error
        for _ in blocks:  # whatever is left still counts towards the digest
            pass
    _check_digest(name, digest.hexdigest(), signed)
    if failure is not None:
        raise failure
    return verdict


def verify(
    path: Path,
    keys_pem: bytes | Sequence[bytes] | None,
    *,
    jobs: int = 1,
    block_bytes: int = BLOCK_BYTES,
    all_signatures: bool = False,
) -> str:
    """A one-line summary when the bundle verifies; raises Mismatch otherwise.

    `keys_pem`: the pinned public keys (PEM texts, each may hold several blocks); None
    takes the keys the bundle carries, which proves only that it is consistent (the
    summary says so). `jobs` processes parse the large files, `block_bytes` at a time.
    Each event's own signature is checked after the event up to which the signed
    statement says the ledger found them valid (`signatures_checked_through`), or from
    the first with `all_signatures`."""
    try:
        archive = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as error:
        raise Unreadable(f"{path}: not a readable zip file ({error})") from None
    with archive:
        check_entries(archive)
        names = set(archive.namelist())
        for required in ("attestation.dsse.json", "manifest.json", SEGMENT):
            if required not in names:
                raise Mismatch(f"{required}: missing from the bundle")
        pinned = keys_pem is not None
        if keys_pem is None:
            if "signing-key.pem" not in names:
                raise Mismatch("signing-key.pem: missing, and no --key was given")
            pems: tuple[bytes, ...] = (archive.read("signing-key.pem"),)
        elif isinstance(keys_pem, bytes):
            pems = (keys_pem,)
        else:
            pems = tuple(keys_pem)
        statement, signer = verify_signature(
            json.loads(archive.read("attestation.dsse.json")), load_keys(pems)
        )
        streamed = frozenset({SEGMENT, RECORDS} & names)
        verify_files(archive, statement, streamed=streamed)
        policies = check_gateway_policies(archive, names)
        signed = signed_digests(statement)
        mark = _checked_through(statement)
        signatures_from = 1 if all_signatures or mark is None else mark[0] + 1
        with ProcessPoolExecutor(jobs) if jobs > 1 else _Inline() as pool:
            segment = _stream(
                archive,
                SEGMENT,
                signed[SEGMENT],
                functools.partial(check_segment_block, pems, signatures_from),
                _read_segment,
                pool,
                jobs,
                block_bytes,
            )
            records = 0
            if RECORDS in names:
                records = _stream(
                    archive,
                    RECORDS,
                    signed[RECORDS],
                    read_records_block,
                    lambda blocks: _check_records(blocks, segment),
                    pool,
                    jobs,
                    block_bytes,
                )
        first, last = segment.period
        if signatures_from > 1 and mark is not None:
            _check_mark(segment, *mark)
        head = statement.get("predicate", {}).get("chain_head", {})
        if (
            last is not None
            and head.get("sequence") == last
            and head.get("hash") != segment.hash_of(last)
        ):
            raise Mismatch(f"chain head: event #{last} differs from the signed chain head")
        if last is not None and isinstance(head.get("sequence"), int) and last > head["sequence"]:
            raise Mismatch(
                f"chain head: the segment ends at #{last}, after the signed head #{head['sequence']}"
            )
    span = f"events #{first} to #{last}" if first is not None else "no events"
    key_note = (
        f"key pinned ({signer})"
        if pinned
        else f"key NOT pinned ({signer}, taken from the bundle; pass --key)"
    )
    if first is None or signatures_from <= first:
        signatures = "each event's signature checked"
    elif last is not None and signatures_from > last:
        signatures = (
            f"their signatures found valid by the ledger through #{signatures_from - 1} "
            "(--all-signatures checks each one here)"
        )
    else:
        signatures = (
            f"each event's signature checked from #{signatures_from} (the ledger found those "
            "before valid; --all-signatures checks each one here)"
        )
    return (
        f"verified: {len(statement['subject'])} files match the signed statement, {span} "
        f"recomputed and linked, {signatures}, {records} exported records in the chain, "
        f"{policies} gateway policy documents match their records, "
        f"chain head #{head.get('sequence')}; {key_note}"
    )


def _checked_through(statement: dict[str, Any]) -> tuple[int, str] | None:
    """(sequence, hash) of the event up to which the ledger found every signature valid."""
    mark = statement.get("predicate", {}).get("signatures_checked_through")
    if not isinstance(mark, dict):
        return None
    sequence, own = mark.get("sequence"), mark.get("hash")
    if not isinstance(sequence, int) or isinstance(sequence, bool) or not isinstance(own, str):
        raise Mismatch(f"statement: signatures_checked_through {mark!r} is malformed")
    return sequence, own


def _check_mark(segment: Segment, sequence: int, own: str) -> None:
    """Where the mark falls inside the segment, the segment must hold the event it names."""
    held = segment.hash_at(sequence)
    if held is not None and held != own:
        raise Mismatch(
            f"statement: signatures_checked_through names event #{sequence} with another "
            "hash than the segment's"
        )


UNPINNED_WARNING = (
    "WARNING: checked only against the key inside the bundle. Whoever re-signs a bundle "
    "can put their own key in it, so this proves the bundle is consistent, not that the "
    "ledger made it. Pin the ledger's key with --key: its fingerprint is on the Audit "
    "page (and `manage.py signing_key` prints it)."
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bundle", type=Path)
    parser.add_argument(
        "--key",
        type=Path,
        action="append",
        help="the ledger's public key (PEM), pinned out of band; repeat it (or put several "
        "PEM blocks in the file) for the keys a rotation retired",
    )
    parser.add_argument(
        "--trust-bundle-key",
        action="store_true",
        help="no pinned key: check against the key inside the bundle, warn, and exit 3",
    )
    parser.add_argument(
        "--all-signatures",
        action="store_true",
        help="check each event's own signature, also those the signed statement says the "
        "ledger checked when it exported",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=os.cpu_count() or 1,
        help="processes that parse and hash the events (default: one per CPU)",
    )
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs {args.jobs}: expected 1 or more")
    if not args.key and not args.trust_bundle_key:
        print(
            "NOT VERIFIED: no key given. Pass the ledger's public key with --key (its "
            "fingerprint is on the Audit page); --trust-bundle-key checks only that the "
            "bundle is consistent with the key it carries.",
            file=sys.stderr,
        )
        return EXIT_UNREADABLE
    if args.key and args.trust_bundle_key:
        parser.error("--key and --trust-bundle-key exclude each other")
    try:
        keys = [path.read_bytes() for path in args.key] if args.key else None
    except OSError as error:
        print(f"cannot read the key: {error}", file=sys.stderr)
        return EXIT_UNREADABLE
    try:
        summary = verify(args.bundle, keys, jobs=args.jobs, all_signatures=args.all_signatures)
    except Unreadable as error:
        print(f"cannot read the bundle: {error}", file=sys.stderr)
        return EXIT_UNREADABLE
    except Mismatch as error:
        print(f"NOT VERIFIED: {error}")
        return EXIT_MISMATCH
    except (ValueError, KeyError) as error:
        print(f"NOT VERIFIED: the bundle is malformed ({error})")
        return EXIT_MISMATCH
    except (zipfile.BadZipFile, zlib.error) as error:
        print(f"NOT VERIFIED: the bundle is damaged ({error})")
        return EXIT_MISMATCH
    print(summary)
    if keys is None:
        print(UNPINNED_WARNING, file=sys.stderr)
        return EXIT_UNPINNED
    return EXIT_VERIFIED


if __name__ == "__main__":
    sys.exit(main())
