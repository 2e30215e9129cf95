"""The evidence bundle: a zip that proves itself to someone who does not trust this server.

Inside:
- ``records/*.jsonl`` — the period's records (events here; the higher apps add theirs);
- ``chain/segment.jsonl`` — every event of the period as a contiguous stretch of the
  chain, preceded by the event just before it, each with exactly the fields its hash
  covers, so `scripts/verify_bundle.py` can recompute every hash and link;
- ``boms/`` — the CycloneDX ML-BOM of every revision the period's events mention (and
  of those the higher apps' records name);
- ``gateway-policies/`` — the document of each gateway policy version those revisions
  run with, as the canonical JSON its recorded sha256 was computed over (so the file's
  digest in the manifest *is* the version's sha256); a version recorded by name only has
  no document and no file;
- ``evidence/`` — the raw load-test files those events mention, named by digest, each
  once however many reports share it;
- ``manifest.json`` — every file with its sha256 and size, the chain head at export time,
  and the event up to which the ledger found every signature valid;
- ``attestation.dsse.json`` — an in-toto Statement (subjects: the files and their
  digests, manifest included; predicate: filters, period, chain head) in a DSSE envelope
  signed with the ledger's Ed25519 key;
- ``signing-key.pem`` — the public keys (the signing key, then retired ones), for
  convenience only: an auditor pins the key out of band (`manage.py signing_key`,
  `/api/ledger/signing-key/`, the fingerprint on the Audit page).
Files are written and hashed as they stream; nothing holds the whole period in memory.
Each name is written once (the verifier refuses a zip with two entries of one name, as
`unzip` would ask which to keep), as a regular file readable by all (0644), dated with
the export's time.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import struct
import time
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import IO, Any

from django.db.models import QuerySet

from ledger import signing
from ledger.chain import canonical_json
from ledger.checkpoints import take_checkpoint
from ledger.cyclonedx import revision_bom
from ledger.exports.events import (
    EVENT_COLUMNS,
    event_rows,
    mentioned_ids,
    period_events,
    segment_records,
)
from ledger.exports.tabular import jsonl_lines
from ledger.models import Event, GatewayPolicy, LoadTestReport, Revision

FORMAT = "inference-release-ledger.bundle/1"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://inference-release-ledger.dev/audit-export/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"


@dataclass(frozen=True)
class RecordFile:
    """A file of records a higher app adds to the bundle: its path and its lines."""

    path: str
    lines: Callable[[], Iterable[str]]


def policy_path(service: str, label: str) -> str:
    """Where a bundle keeps a gateway policy version's document (the verifier reads the
    same name from the version's record)."""
    return f"gateway-policies/{service}-{label}.json"


# A regular file, rw-r--r--, in the external attributes' high half (the Unix mode).
_FILE_ATTRIBUTES = 0o100644 << 16


@dataclass
class _Written:
    moment: dt.datetime
    on_file: Callable[[str], None] | None = None
    files: list[dict[str, Any]] = field(default_factory=list)
    names: set[str] = field(default_factory=set)

    def entry(self, path: str) -> zipfile.ZipInfo:
        """The entry of a new file; a name written already is a bug, refused."""
        if path in self.names:
            raise ValueError(f"{path} is already in the bundle")
        self.names.add(path)
        # The DOS time fields are local time, as unzip and zipfile read them; the
        # extended timestamp (0x5455) gives extractors the exact moment in UTC.
        moment = int(self.moment.timestamp())
        info = zipfile.ZipInfo(path, date_time=time.localtime(moment)[:6])
        info.extra = struct.pack("<HHBL", 0x5455, 5, 1, moment)
        info.compress_type = zipfile.ZIP_DEFLATED
        info.create_system = 3  # Unix, so that extractors read the mode
        info.external_attr = _FILE_ATTRIBUTES
        return info

    def add(self, path: str, sha256: str, size: int) -> None:
        self.files.append({"path": path, "sha256": sha256, "size": size})
        if self.on_file is not None:
            self.on_file(path)


def _write(archive: zipfile.ZipFile, written: _Written, path: str, chunks: Iterable[bytes]) -> str:
    digest = hashlib.sha256()
    size = 0
    with archive.open(written.entry(path), "w", force_zip64=True) as out:
        for chunk in chunks:
            digest.update(chunk)
            size += len(chunk)
            out.write(chunk)
    written.add(path, digest.hexdigest(), size)
    return digest.hexdigest()


def _chunks(file: IO[bytes]) -> Iterator[bytes]:
    while chunk := file.read(1 << 20):
        yield chunk


def _encoded(lines: Iterable[str]) -> Iterator[bytes]:
    for line in lines:
        yield line.encode()


def write_bundle(
    out: IO[bytes],
    *,
    since: dt.datetime,
    until: dt.datetime,
    service: str | None = None,
    records: Iterable[RecordFile] = (),
    events: QuerySet[Event] | None = None,
    filters: dict[str, Any] | None = None,
    on_file: Callable[[str], None] | None = None,
    revision_ids: Iterable[int] = (),
) -> dict[str, Any]:
    """Write the bundle to `out`; answer its manifest.

    `events`: the period's events to list as records (default: the period's, of
    `service` if given); the chain segment is always the whole period, so it stays
    contiguous. `filters` are recorded in the manifest and the signed predicate
    (default: the service). `on_file(path)` is told each file once it is written.
    `revision_ids`: revisions to give a BOM (and their policy's document) besides those
    the events mention.
    """
    if events is None:
        events = period_events(since, until, service=service)
    created = dt.datetime.now(dt.UTC)
    written = _Written(created, on_file)
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        _write(
            archive,
            written,
            "records/events.jsonl",
            _encoded(jsonl_lines(EVENT_COLUMNS, event_rows(events))),
        )
        for extra in records:
            _write(archive, written, extra.path, _encoded(extra.lines()))
        segment = _encoded(canonical_json(r) + "\n" for r in segment_records(since, until))
        _write(archive, written, "chain/segment.jsonl", segment)
        revisions = Revision.objects.with_parts().filter(
            pk__in={*mentioned_ids(events, "ledger.revision"), *revision_ids}
        )
        policies: dict[int, tuple[str, GatewayPolicy]] = {}
        for revision in revisions.order_by("pk"):
            text = json.dumps(revision_bom(revision), indent=2, sort_keys=True)
            _write(
                archive,
                written,
                f"boms/{revision.service.slug}-{revision.label}.cdx.json",
                [text.encode()],
            )
            policies[revision.gateway_policy_id] = (revision.service.slug, revision.gateway_policy)
        for slug, policy in sorted(policies.values(), key=lambda item: item[1].pk):
            if policy.known:
                _write(
                    archive,
                    written,
                    policy_path(slug, policy.label),
                    [canonical_json(policy.document).encode()],
                )
        reports = LoadTestReport.objects.filter(
            pk__in=mentioned_ids(events, "ledger.loadtestreport")
        ).order_by("pk")
        # Content-addressed: reports of one file (the same run filed for several
        # workloads or revisions) share its one copy.
        copied: set[str] = set()
        for report in reports:
            if report.raw_sha256 in copied:
                continue
            copied.add(report.raw_sha256)
            suffix = PurePosixPath(report.filename).suffix[:16]
            with report.raw_file.open("rb") as raw:
                _write(archive, written, f"evidence/{report.raw_sha256}{suffix}", _chunks(raw))
        checkpoint = take_checkpoint(reason="export")
        manifest = {
            "format": FORMAT,
            "created_at": created.isoformat(timespec="seconds"),
            "filters": filters if filters is not None else {"service": service},
            "period": {"since": since.isoformat(), "until": until.isoformat()},
            "chain_head": {"sequence": checkpoint.sequence, "hash": checkpoint.hash},
            # Every event up to here carried a valid signature when the ledger checked
            # (the export's checkpoint): the verifier checks each one only after it.
            "signatures_checked_through": {
                "sequence": checkpoint.signed_through,
                "hash": checkpoint.signed_through_hash,
            },
            "key_id": checkpoint.key_id,
            "files": written.files,
        }
        manifest_bytes = json.dumps(manifest, indent=2, sort_keys=True).encode()
        manifest_sha = hashlib.sha256(manifest_bytes).hexdigest()
        archive.writestr(written.entry("manifest.json"), manifest_bytes)
        statement = {
            "_type": STATEMENT_TYPE,
            "subject": [
                {"name": f["path"], "digest": {"sha256": f["sha256"]}} for f in written.files
            ]
            + [{"name": "manifest.json", "digest": {"sha256": manifest_sha}}],
            "predicateType": PREDICATE_TYPE,
            "predicate": {
                "filters": manifest["filters"],
                "period": manifest["period"],
                "chain_head": manifest["chain_head"],
                "signatures_checked_through": manifest["signatures_checked_through"],
            },
        }
        envelope = signing.sign(canonical_json(statement).encode(), PAYLOAD_TYPE)
        attestation = json.dumps(envelope, indent=2)
        archive.writestr(written.entry("attestation.dsse.json"), attestation)
        archive.writestr(written.entry("signing-key.pem"), signing.trusted_keys_pem())
    return manifest
