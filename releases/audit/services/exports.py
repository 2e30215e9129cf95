"""Auditor exports: request one, build it (in a worker), hand out a short-lived link.

- `request_export` writes the request and its Event and queues `build_export` on
  commit: the page or the API answers at once.
- `build_export` (run by the task) claims the request (queued → building, a
  conditional UPDATE, so a redelivered task does nothing), streams the records
  through the writers of `ledger.exports` into a temporary file — CSV or JSON
  Lines, one file per record type (`releases.audit.records.RECORD_TYPES`) plus a
  manifest, zipped; or the signed evidence bundle — stores it in the default
  storage, and records its sha256, size and the chain head it covers, with an
  `export.ready` Event. Progress is written to the row as files are written.
- `download_link` records who downloads what (an `export.downloaded` Event with the
  digest) and answers a link that expires after EXPORT_LINK_EXPIRY_SECONDS: a
  presigned GET on S3, or a URL of this site signed with `django.core.signing` on
  the local-folder default (`open_signed_download` checks it).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import tempfile
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import IO, Any

from django.conf import settings
from django.core import signing
from django.core.exceptions import ValidationError
from django.core.files import File
from django.core.files.storage import default_storage
from django.db import connection, transaction
from django.urls import reverse
from django.utils import timezone
from django.utils.http import content_disposition_header
from storages.backends.s3 import S3Storage

from ledger.chain import append_event
from ledger.checkpoints import take_checkpoint
from ledger.exports.bundle import RecordFile, write_bundle
from ledger.exports.events import copy_csv, mentioned_ids
from ledger.exports.tabular import csv_lines, jsonl_lines
from ledger.models import Service
from lib.actors import Actor
from lib.tasks import send_on_commit
from releases import permissions
from releases.audit.records import RECORD_TYPES, AuditFilters, RecordType
from releases.cost.focus import focus_lines, period_days
from releases.cost.focus_copy import focus_bytes
from releases.models import Export, Release

logger = logging.getLogger(__name__)

# Without a period, an export covers everything from the start of the ledger.
EARLIEST = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
DOWNLOAD_SALT = "releases.export-download"
PROGRESS_EVERY_ROWS = 5000


class ExportNotReady(Exception):
    """The export is not (or no longer) downloadable; the message says why."""


# ---------------------------------------------------------------- request


def _check_filters(filters: AuditFilters, fmt: str) -> None:
    errors: dict[str, str] = {}
    if fmt not in Export.Format.values:
        errors["format"] = f"{fmt!r} is not a format; choose csv, jsonl or bundle."
    choices = {
        "tier": Service.Tier.values,
        "change_kind": Release.ChangeKind.values,
        "path": Release.Path.values,
        "state": Release.State.values,
    }
    for name, allowed in choices.items():
        value = getattr(filters, name)
        if value and value not in allowed:
            errors[name] = f"{value!r} is not one of: {', '.join(allowed)}."
    if filters.service and not Service.objects.filter(slug=filters.service).exists():
        errors["service"] = f"No service is named {filters.service!r}."
    since, until = filters.since or EARLIEST, filters.until or timezone.now()
    if until <= since:
        errors["until"] = (
            f"The period ends ({until:%Y-%m-%d %H:%M %Z}) before it starts "
            f"({since:%Y-%m-%d %H:%M %Z}); without a start it starts on {EARLIEST:%Y-%m-%d}, "
            "without an end it ends now."
        )
    if errors:
        raise ValidationError(errors)


@transaction.atomic
def request_export(*, actor: Actor, format: str, filters: AuditFilters) -> Export:
    """Queue an export of the records `filters` select; the worker builds it."""
    permissions.ensure_can_request_exports(actor)
    if actor is None:
        raise ValidationError({"requested_by": "An export is requested by a person."})
    _check_filters(filters, format)
    export = Export.objects.create(
        requested_by=actor,
        format=format,
        period_start=filters.since or EARLIEST,
        period_end=filters.until or timezone.now(),
        filters=filters.as_json(),
    )
    append_event(
        actor=actor,
        action="export.requested",
        subject=export,
        payload={
            "format": format,
            "period": {"since": export.period_start, "until": export.period_end},
            "filters": export.filters,
        },
    )
    send_on_commit("build_export", export.pk)
    return export


def filters_of(export: Export) -> AuditFilters:
    return AuditFilters.from_json(
        export.filters, since=export.period_start, until=export.period_end
    )


# ---------------------------------------------------------------- build

# The period's cost as FinOps FOCUS 1.0 CSV (releases/cost/focus.py), in every export.
COST_FILE = "cost-focus.csv"


def _cost_scope(filters: AuditFilters) -> tuple[dt.date, dt.date, list[str] | None]:
    """The days of the period and the services the filters select.

    Cost belongs to services, not to releases: a release filter (change kind, path,
    state) selects no cost, and the file holds its header only."""
    assert filters.since is not None and filters.until is not None
    services = None
    if filters.service or filters.tier:
        chosen = Service.objects.all()
        if filters.service:
            chosen = chosen.filter(slug=filters.service)
        if filters.tier:
            chosen = chosen.filter(tier=filters.tier)
        services = list(chosen.values_list("slug", flat=True))
    if filters.narrows_releases:
        services = []
    since, until = period_days(filters.since, filters.until)
    return since, until, services


def cost_lines(filters: AuditFilters) -> Iterator[str]:
    """The FOCUS rows of the services the filters select, over the days of the period,
    written in Python (the evidence bundle's record file)."""
    return focus_lines(*_cost_scope(filters))


def cost_chunks(filters: AuditFilters) -> Iterator[bytes]:
    """The same CSV as UTF-8, by PostgreSQL's COPY where it can (the auditor's export)."""
    return focus_bytes(*_cost_scope(filters))


def _claim(export_id: int) -> Export | None:
    """queued → building; a building export whose worker died (past the task's time
    limit) may be claimed again. None when there is nothing to build."""
    now = timezone.now()
    claimed = Export.objects.filter(pk=export_id, state=Export.State.QUEUED).update(
        state=Export.State.BUILDING, started_at=now, progress=0, progress_note="starting"
    )
    if not claimed:
        stale = now - dt.timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT)
        claimed = Export.objects.filter(
            pk=export_id, state=Export.State.BUILDING, started_at__lt=stale
        ).update(started_at=now, progress=0, progress_note="starting again")
    if not claimed:
        return None
    return Export.objects.select_related("requested_by").get(pk=export_id)


@dataclass
class _Progress:
    """Writes the percentage done to the row now and then (the page polls it)."""

    export_id: int
    total: int
    done: int = 0
    last: int = -1

    def advance(self, by: int, note: str) -> None:
        self.done += by
        percent = min(99, int(100 * self.done / self.total)) if self.total else 99
        if percent != self.last:
            self.last = percent
            Export.objects.filter(pk=self.export_id).update(
                progress=percent, progress_note=note[:200]
            )

    def counted(self, rows: Iterable[tuple[Any, ...]], note: str) -> Iterator[tuple[Any, ...]]:
        pending = 0
        for row in rows:
            yield row
            pending += 1
            if pending == PROGRESS_EVERY_ROWS:
                self.advance(pending, note)
                pending = 0
        self.advance(pending, note)


class _Hashing:
    """A writable file that hashes and counts what passes through it."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out = out
        self.digest = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.digest.update(data)
        self.size += len(data)
        return self.out.write(data)

    def flush(self) -> None:
        self.out.flush()


def record_chunks(
    record: RecordType, filters: AuditFilters, fmt: str, progress: _Progress | None = None
) -> Iterator[bytes]:
    """One record type's rows as CSV or JSON Lines bytes, streamed (also
    `manage.py export_audit`'s)."""
    queryset = record.queryset(filters)
    plain = not (filters.tier or filters.narrows_releases)
    if fmt == "csv" and record.key == "events" and plain and connection.vendor == "postgresql":
        # PostgreSQL's COPY writes the same CSV as the Python path, much faster; it
        # holds the connection until done, so progress is told after the file.
        assert filters.since is not None and filters.until is not None
        yield from copy_csv(filters.since, filters.until, service=filters.service or None)
        if progress is not None:
            progress.advance(0, f"wrote {record.key}.csv")
        return
    lines = csv_lines if fmt == "csv" else jsonl_lines
    rows = record.rows(queryset)
    if progress is not None:
        rows = progress.counted(rows, f"writing {record.key}.{fmt}")
    for text in lines(record.columns, rows):
        yield text.encode()


def _write_tabular(
    out: IO[bytes], export: Export, filters: AuditFilters, counts: dict[str, int]
) -> tuple[int, str]:
    progress = _Progress(export.pk, total=max(sum(counts.values()), 1))
    files = []
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for record in RECORD_TYPES.values():
            chunks = record_chunks(record, filters, export.format, progress)
            files.append(_member(archive, f"{record.key}.{export.format}", chunks))
        files.append(_member(archive, COST_FILE, cost_chunks(filters)))
        checkpoint = take_checkpoint(reason="export")
        manifest = {
            "format": f"inference-release-ledger.{export.format}/1",
            "export": export.pk,
            "created_at": timezone.now().isoformat(timespec="seconds"),
            "period": {
                "since": export.period_start.isoformat(),
                "until": export.period_end.isoformat(),
            },
            "filters": export.filters,
            "records": counts,
            "chain_head": {"sequence": checkpoint.sequence, "hash": checkpoint.hash},
            "files": files,
        }
        archive.writestr("manifest.json", json.dumps(manifest, indent=2, sort_keys=True))
    return checkpoint.sequence, checkpoint.hash


def _member(archive: zipfile.ZipFile, path: str, chunks: Iterable[bytes]) -> dict[str, Any]:
    digest = hashlib.sha256()
    size = 0
    with archive.open(path, "w", force_zip64=True) as member:
        for chunk in chunks:
            digest.update(chunk)
            size += len(chunk)
            member.write(chunk)
    return {"path": path, "sha256": digest.hexdigest(), "size": size}


def _jsonl_file(record: RecordType, filters: AuditFilters) -> RecordFile:
    def lines() -> Iterator[str]:
        return jsonl_lines(record.columns, record.rows(record.queryset(filters)))

    return RecordFile(path=f"records/{record.key}.jsonl", lines=lines)


def bundle_record_files(filters: AuditFilters) -> list[RecordFile]:
    """The records a bundle carries besides its events (which `write_bundle` writes)."""
    files = [_jsonl_file(r, filters) for key, r in RECORD_TYPES.items() if key != "events"]
    return [*files, RecordFile(path=f"records/{COST_FILE}", lines=lambda: cost_lines(filters))]


def bundle_revision_ids(filters: AuditFilters) -> list[int]:
    """The revisions the records name: each gets its BOM in the bundle, and its gateway
    policy version's document beside it, as do those the events mention."""
    revisions = RECORD_TYPES["revisions"].queryset(filters)
    return list(revisions.order_by("pk").values_list("pk", flat=True))


def _write_bundle(out: IO[bytes], export: Export, filters: AuditFilters) -> tuple[int, str]:
    events = RECORD_TYPES["events"].queryset(filters)
    revision_ids = bundle_revision_ids(filters)
    # The files the bundle will hold: one per record type, the chain segment, a BOM
    # per revision (and about as many policy documents, fewer when revisions share
    # one) and a raw file per load-test report the events mention.
    revisions = {*mentioned_ids(events, "ledger.revision"), *revision_ids}
    expected = (
        len(RECORD_TYPES)
        + 2  # the chain segment and the cost
        + 2 * len(revisions)
        + len(mentioned_ids(events, "ledger.loadtestreport"))
    )
    progress = _Progress(export.pk, total=expected)
    assert filters.since is not None and filters.until is not None
    manifest = write_bundle(
        out,
        since=filters.since,
        until=filters.until,
        service=filters.service or None,
        records=bundle_record_files(filters),
        events=events,
        filters=dict(export.filters),
        on_file=lambda path: progress.advance(1, f"wrote {path}"),
        revision_ids=revision_ids,
    )
    head = manifest["chain_head"]
    return head["sequence"], head["hash"]


def _filename(export: Export) -> str:
    start = export.period_start.astimezone(dt.UTC)
    end = export.period_end.astimezone(dt.UTC)
    kind = "bundle" if export.format == Export.Format.BUNDLE else export.format
    return f"ledger-{kind}-{start:%Y%m%d}-{end:%Y%m%d}-{export.pk}.zip"


def build_export(export_id: int) -> Export | None:
    """Build a queued export (the `build_export` task's body). None when there is none
    to build (gone, already built, or being built by another worker)."""
    export = _claim(export_id)
    if export is None:
        return None
    filters = filters_of(export)
    try:
        counts = {key: r.queryset(filters).count() for key, r in RECORD_TYPES.items()}
        with tempfile.TemporaryFile(prefix="ledger-export-") as raw:
            hashing = _Hashing(raw)
            if export.format == Export.Format.BUNDLE:
                head = _write_bundle(hashing, export, filters)  # type: ignore[arg-type]
            else:
                head = _write_tabular(hashing, export, filters, counts)  # type: ignore[arg-type]
            raw.seek(0)
            filename = _filename(export)
            Export.objects.filter(pk=export.pk).update(progress=99, progress_note="storing")
            name = default_storage.save(f"exports/{export.pk}/{filename}", File(raw, filename))
    except Exception as error:
        logger.exception("export #%s failed", export.pk)
        _fail(export, f"{type(error).__name__}: {error}")
        return export
    with transaction.atomic():
        export = Export.objects.select_for_update().get(pk=export.pk)
        export.file.name = name
        export.filename = filename
        export.sha256 = hashing.digest.hexdigest()
        export.size = hashing.size
        export.chain_head_sequence, export.chain_head_hash = head
        export.record_counts = counts
        export.state = Export.State.READY
        export.progress = 100
        export.progress_note = "ready"
        export.finished_at = timezone.now()
        export.error = ""
        export.save()
        append_event(
            actor=None,
            action="export.ready",
            subject=export,
            payload={
                "requested_by": export.requested_by.get_username(),
                "format": export.format,
                "period": {"since": export.period_start, "until": export.period_end},
                "filters": export.filters,
                "records": counts,
                "sha256": export.sha256,
                "size": export.size,
                "chain_head": {"sequence": head[0], "hash": head[1]},
            },
        )
    return export


def _fail(export: Export, reason: str) -> None:
    with transaction.atomic():
        Export.objects.filter(pk=export.pk).update(
            state=Export.State.FAILED,
            error=reason[:2000],
            progress_note="failed",
            finished_at=timezone.now(),
        )
        append_event(
            actor=None,
            action="export.failed",
            subject=export,
            payload={"format": export.format, "error": reason[:500]},
        )


# ---------------------------------------------------------------- download


@dataclass(frozen=True)
class DownloadLink:
    url: str  # absolute for S3, a path of this site otherwise
    expires_at: dt.datetime


def _is_s3(storage: Any) -> bool:
    return isinstance(storage, S3Storage)


@transaction.atomic
def download_link(export: Export, *, actor: Actor) -> DownloadLink:
    """Record the download as an Event and answer a link that expires soon."""
    permissions.ensure_can_request_exports(actor)
    export = Export.objects.select_for_update().get(pk=export.pk)
    if export.state != Export.State.READY:
        raise ExportNotReady(
            f"Export #{export.pk} is {export.get_state_display().lower()}: only a ready export "
            "can be downloaded."
        )
    seconds = settings.EXPORT_LINK_EXPIRY_SECONDS
    expires_at = timezone.now() + dt.timedelta(seconds=seconds)
    append_event(
        actor=actor,
        action="export.downloaded",
        subject=export,
        payload={
            "format": export.format,
            "sha256": export.sha256,
            "size": export.size,
            "link_expires_at": expires_at,
        },
    )
    storage = export.file.storage
    if _is_s3(storage):
        url = storage.url(
            export.file.name,
            expire=seconds,
            parameters={
                "ResponseContentDisposition": content_disposition_header(True, export.filename)
            },
        )
    else:
        token = signing.dumps(
            {"export": export.pk, "by": actor.pk if actor else None}, salt=DOWNLOAD_SALT
        )
        url = reverse("releases:export_file", kwargs={"pk": export.pk, "token": token})
    return DownloadLink(url=url, expires_at=expires_at)


def open_signed_download(pk: int, token: str) -> Export:
    """The export a signed local link names, if the link is its own and not expired."""
    try:
        data = signing.loads(token, salt=DOWNLOAD_SALT, max_age=settings.EXPORT_LINK_EXPIRY_SECONDS)
    except signing.SignatureExpired:
        raise ExportNotReady(
            "This download link has expired: links last "
            f"{settings.EXPORT_LINK_EXPIRY_SECONDS} seconds. Ask for a new one on the export's page."
        ) from None
    except signing.BadSignature:
        raise ExportNotReady("This download link is not valid.") from None
    if not isinstance(data, dict) or data.get("export") != pk:
        raise ExportNotReady("This download link is not valid.")
    export = Export.objects.filter(pk=pk, state=Export.State.READY).first()
    if export is None:
        raise ExportNotReady(f"Export #{pk} cannot be downloaded.")
    return export


__all__ = [
    "DownloadLink",
    "ExportNotReady",
    "build_export",
    "bundle_record_files",
    "bundle_revision_ids",
    "download_link",
    "filters_of",
    "open_signed_download",
    "record_chunks",
    "request_export",
]
