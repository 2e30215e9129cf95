"""Load-test evidence verbs: import a report (raw file kept, parsed, recorded), or preview one.

The raw file is streamed three times and never held whole in memory: once to
hash and measure it, once to parse it (the importers stream JSON Lines and
CSV), once into storage. Uploads are seekable (Django spools big ones to a
temporary file); the command opens the file from disk.

A failed import leaves nothing behind: the stored object is deleted when
anything after storing it fails, and the row and its Event are one transaction.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import os
from collections.abc import Mapping
from typing import IO, Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.files import File
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from ledger import permissions
from ledger.chain import append_event
from ledger.importers import FORMATS, ParsedReport, ReportFormatError, parse_report
from ledger.importers.report import ReportJSON
from ledger.metrics_import import Peaks
from ledger.models import LoadTestReport, LoadTestRequestData, RequestLevel, Revision
from ledger.queries import (
    Mismatch,
    file_identity,
    goodput_slo,
    level_goodputs,
    match_evidence,
    normalise_gpu,
)
from ledger.services.scrape_peaks import read_scrape_peaks
from ledger.validators import validate_override_reason
from lib.actors import Actor

__all__ = [
    "check_evidence_match",
    "hardware_for",
    "import_loadtest_report",
    "preview_loadtest_report",
]

logger = logging.getLogger(__name__)

_CHUNK = 1024 * 1024
# measured_at may be a little ahead: clocks of CI runners drift.
_CLOCK_SKEW = dt.timedelta(minutes=5)

# The reason given for attaching a file that measured something else.
_REASON_MAX = 500


def _max_bytes() -> int:
    return settings.LOADTEST_MAX_UPLOAD_BYTES


def _too_large(filename: str, size: int | None, limit: int) -> ValidationError:
    params = {"filename": filename, "limit": f"{limit:,}", "mb": f"{limit / 1024 / 1024:g}"}
    if size is not None:
        message = _(
            "%(filename)s: the file is %(size)s bytes; the limit is %(limit)s bytes "
            "(%(mb)s MB, LOADTEST_MAX_UPLOAD_BYTES)."
        ) % {**params, "size": f"{size:,}"}
    else:
        message = (
            _(
                "%(filename)s: the file is larger than that; the limit is %(limit)s bytes "
                "(%(mb)s MB, LOADTEST_MAX_UPLOAD_BYTES)."
            )
            % params
        )
    return ValidationError(
        {
            "file": ValidationError(
                message,
                code="too_large",
            )
        }
    )


def _hash_and_measure(stream: IO[bytes], filename: str) -> tuple[str, int]:
    """sha256 and size of the whole stream, read in chunks; refuses a file over the limit."""
    limit = _max_bytes()
    declared = getattr(stream, "size", None)
    if isinstance(declared, int) and declared > limit:
        raise _too_large(filename, declared, limit)
    stream.seek(0)
    digest = hashlib.sha256()
    size = 0
    while chunk := stream.read(_CHUNK):
        size += len(chunk)
        if size > limit:
            raise _too_large(filename, None, limit)
        digest.update(chunk)
    stream.seek(0)
    return digest.hexdigest(), size


def _parse(stream: IO[bytes], filename: str, format: str | None) -> ParsedReport:
    stream.seek(0)
    try:
        return parse_report(stream, filename=filename, format=format, max_bytes=_max_bytes())
    except ReportFormatError as exc:
        raise ValidationError({"file": ValidationError(str(exc), code="invalid")}) from exc


def _check_choices(workload: str | None, format: str | None) -> None:
    errors: dict[str, str] = {}
    if workload is not None and workload not in LoadTestReport.Workload.values:
        errors["workload"] = (
            f"Unknown workload class {workload!r}; expected one of "
            f"{', '.join(LoadTestReport.Workload.values)}."
        )
    if format is not None and format not in FORMATS:
        errors["format"] = f"Unknown format {format!r}; expected one of {', '.join(FORMATS)}."
    if errors:
        raise ValidationError(errors)


def _binary(file: Any) -> IO[bytes]:
    if isinstance(file, str | os.PathLike):
        raise TypeError("pass an open binary file (or an uploaded file), not a path")
    return file


class Preview(ReportJSON):
    sha256: str
    size_bytes: int


def preview_loadtest_report(
    file: IO[bytes],
    *,
    filename: str,
    format: str | None = None,
    metrics_before: IO[bytes] | None = None,
    metrics_after: IO[bytes] | None = None,
) -> Preview:
    """Parse an upload without storing or recording anything: what the upload
    form shows before the model owner saves. Same checks and errors as the import."""
    stream = _binary(file)
    _check_choices(None, format)
    scraped = read_scrape_peaks(metrics_before, metrics_after)
    sha256, size = _hash_and_measure(stream, filename)
    parsed = _parse(stream, filename, format)
    stream.seek(0)
    preview: Preview = {**parsed.to_json(), "sha256": sha256, "size_bytes": size}
    if peaks := _merged_peaks(scraped, parsed):
        preview["peaks"] = peaks
    return preview


def _merged_peaks(scraped: Peaks, parsed: ParsedReport) -> Peaks:
    # The tool's own figure (sampled during the test) beats the two scrapes' lower bound.
    return {**scraped, **parsed.peaks}


def hardware_for(revision: Revision, parsed: ParsedReport) -> tuple[dict[str, Any], list[str]]:
    """What the report ran on: the revision's runtime, unless the file says otherwise.

    Returns the hardware and warnings (when the file names other hardware than
    the runtime, the report is stale from the start: see evidence_status).
    """
    runtime = revision.runtime
    hardware: dict[str, Any] = {
        "gpu_model": runtime.gpu_model,
        "gpu_count": runtime.gpu_count,
        "gpu_memory_gb": runtime.gpu_memory_gb,
        "source": "runtime",
    }
    found = file_identity(parsed.meta)
    model, count = found.gpu_model, found.gpu_count
    if model is None and count is None:
        return hardware, []
    if model is not None:
        hardware["gpu_model"] = model
    if count is not None:
        hardware["gpu_count"] = count
    hardware["source"] = "file"
    warnings = []
    if (normalise_gpu(hardware["gpu_model"] or ""), hardware["gpu_count"]) != (
        normalise_gpu(runtime.gpu_model or ""),
        runtime.gpu_count,
    ):
        warnings.append(
            f"the file says it ran on {hardware['gpu_count']} x {hardware['gpu_model']}; "
            f"runtime {runtime.name} has {runtime.gpu_count} x {runtime.gpu_model or 'unnamed GPU'}"
        )
    return hardware, warnings


def check_evidence_match(
    revision: Revision, parsed: ParsedReport, *, filename: str, accept_mismatch: str = ""
) -> Mismatch | None:
    """Refuse a file that measured another model, engine or GPU than `revision`, unless a
    reason is given; then return what to record (`LoadTestReport.mismatch`).

    The refusal is keyed `accept_mismatch` (the form field, the API field and the
    command's flag that take the reason) and names both sides.
    """
    match = match_evidence(revision, parsed.meta)
    if match.matches:
        return None
    label = f"{revision.service.slug} {revision.label}"
    reason = (accept_mismatch or "").strip()
    if not reason:
        raise ValidationError(
            {
                "accept_mismatch": ValidationError(
                    _(
                        "%(filename)s measured something other than %(label)s: "
                        "%(summary)s. Attach it to the revision it measured, "
                        'or give the reason it belongs here anyway ("measured on a different '
                        'model — reason"); the report is then marked mismatched.'
                    )
                    % {
                        "filename": filename,
                        "label": label,
                        "summary": match.summary(revision.label),
                    },
                    code="mismatch",
                )
            }
        )
    try:
        validate_override_reason(reason, max_length=_REASON_MAX)
    except ValidationError as error:
        raise ValidationError({"accept_mismatch": error}) from error
    return {"fields": match.fields, "reason": reason, "differences": match.differences}


def _request_arrays(parsed: ParsedReport) -> list[RequestLevel] | None:
    if not parsed.levels or any(level.requests is None for level in parsed.levels):
        return None
    return [
        {
            "ttft": level.requests.ttft_ms,
            "tpot": level.requests.tpot_ms,
            "error": level.requests.error,
        }
        for level in parsed.levels
        if level.requests is not None
    ]


def _build_report(
    revision: Revision,
    parsed: ParsedReport,
    *,
    actor: Actor,
    workload: str,
    filename: str,
    sha256: str,
    size: int,
    measured_at: dt.datetime,
    mismatch: Mismatch | None,
    origin: Mapping[str, Any] | None,
    scraped: Peaks,
) -> tuple[LoadTestReport, LoadTestRequestData | None]:
    hardware, hardware_warnings = hardware_for(revision, parsed)
    results = parsed.to_json()
    if origin:
        results["origin"] = dict(origin)
    peaks = _merged_peaks(scraped, parsed)
    if peaks:
        results["peaks"] = peaks
    first = parsed.levels[0]
    slo = goodput_slo(revision.service)
    arrays = _request_arrays(parsed)
    packed = None
    request_count = 0
    goodputs = []
    if arrays is not None:
        packed = LoadTestRequestData.pack(arrays)
        request_count = sum(len(a["error"]) for a in arrays)
        # Computed from the stored (float32) arrays, so a recomputation agrees exactly.
        goodputs = level_goodputs(LoadTestRequestData.unpack(packed), slo)
    report = LoadTestReport(
        revision=revision,
        workload=workload,
        tool=parsed.tool,
        tool_version=(parsed.tool_version or "")[:40],
        format=parsed.format,
        variant=parsed.variant,
        source=parsed.source,
        raw_sha256=sha256,
        raw_size=size,
        filename=filename[:255],
        fingerprint=revision.fingerprint,
        hardware=hardware,
        measured_at=measured_at,
        uploaded_by=actor if actor is not None and actor.is_authenticated else None,
        results=results,
        warnings=[*parsed.warnings, *hardware_warnings],
        mismatch=mismatch or {},
        # A file that names no model could not be checked against the revision.
        model_verified=file_identity(parsed.meta).model is not None,
        level_count=len(parsed.levels),
        requests=first.conditions.requests,
        errored=first.conditions.errored,
        error_rate=first.conditions.error_rate,
        ttft_p95_ms=first.ttft.p95,
        ttft_p99_ms=first.ttft.p99,
        tpot_p95_ms=first.tpot.p95,
        output_tokens_per_s=first.throughput.output_tokens_per_s,
        concurrency=first.conditions.concurrency,
        gpu_memory_peak_gib=_peak(peaks, "gpu_memory_peak_gib"),
        kv_cache_peak_pct=_peak(peaks, "kv_cache_peak_pct"),
        has_request_data=packed is not None,
        goodput=goodputs[0].value if goodputs else None,
        goodput_reason=goodputs[0].reason if goodputs else "the file has no per-request data",
        goodput_levels=[g.value for g in goodputs],
        goodput_slo=slo if packed is not None else {},
    )
    data = None
    if packed is not None:
        data = LoadTestRequestData(report=report, request_count=request_count, arrays=packed)
    return report, data


def _peak(peaks: Peaks, column: str) -> float | None:
    found = peaks.get(column)
    return None if found is None else found["value"]


def _delete_quietly(storage, name: str) -> None:
    try:
        storage.delete(name)
    except Exception:
        # The import already failed; say where the orphan is rather than hide the first error.
        logger.exception("could not delete %s after a failed load-test import", name)


def import_loadtest_report(
    revision: Revision,
    *,
    actor: Actor,
    workload: str,
    file: IO[bytes],
    filename: str,
    format: str | None = None,
    measured_at: dt.datetime | None = None,
    accept_mismatch: str = "",
    tool: str = "",
    origin: Mapping[str, Any] | None = None,
    metrics_before: IO[bytes] | None = None,
    metrics_after: IO[bytes] | None = None,
) -> tuple[LoadTestReport, bool]:
    """Attach a load-test file to a revision as evidence for one workload class.

    For a file the ledger wrote itself (a drill's requests, in the generic format),
    `tool` names what measured it instead of the format's tool, and `origin` (JSON: what
    wrote it, e.g. `{"kind": "drill", "id": 7}`) is kept in the results and the Event.

    `metrics_before` and `metrics_after` (both or neither) are scrapes of the engine or
    DCGM taken around the test: GPU memory and KV-cache peaks the file itself does not
    record are read from them (`services.scrape_peaks`), and `results["peaks"]` says
    where each came from.

    Returns (report, created). The same file uploaded again for the same
    revision returns the existing report and records nothing. Raises
    PermissionDenied unless the actor is a model owner of the service's team
    (None is the system), and ValidationError keyed by `file` (naming the file
    and the line or JSON path), `workload`, `format`, `measured_at` or
    `accept_mismatch` (the file measured another model, engine or GPU: see
    `check_evidence_match`; with a reason it is attached and marked mismatched),
    `metrics_before` or `metrics_after` (naming the file and line).
    """
    stream = _binary(file)
    revision = Revision.objects.select_related("service__team", "runtime", "model_asset").get(
        pk=revision.pk
    )
    permissions.ensure_can_attach_evidence(revision, actor=actor)
    _check_choices(workload, format)
    now = timezone.now()
    if measured_at is not None and measured_at > now + _CLOCK_SKEW:
        raise ValidationError({"measured_at": f"{measured_at:%Y-%m-%d %H:%M %Z} is in the future."})
    scraped = read_scrape_peaks(metrics_before, metrics_after)

    sha256, size = _hash_and_measure(stream, filename)
    existing = LoadTestReport.objects.filter(revision=revision, raw_sha256=sha256).first()
    if existing is not None:
        return existing, False
    parsed = _parse(stream, filename, format)
    if tool:
        parsed.tool = tool
    mismatch = check_evidence_match(
        revision, parsed, filename=filename, accept_mismatch=accept_mismatch
    )
    report, data = _build_report(
        revision,
        parsed,
        actor=actor,
        workload=workload,
        filename=filename,
        sha256=sha256,
        size=size,
        measured_at=measured_at or now,
        mismatch=mismatch,
        origin=origin,
        scraped=scraped,
    )
    report.clean_fields(exclude=["raw_file", "revision", "uploaded_by"])

    stream.seek(0)
    storage = report.raw_file.storage
    # Stores under raw_file_key: loadtest/<revision>/<sha256>/<filename>.
    report.raw_file.save(filename, File(stream, name=filename), save=False)
    stored = report.raw_file.name
    try:
        with transaction.atomic():
            report.save(force_insert=True)
            if data is not None:
                data.report = report
                data.save(force_insert=True)
            append_event(
                actor=actor,
                action="loadtest_report.imported",
                subject=report,
                payload=_event_payload(report),
            )
    except IntegrityError:
        # Someone imported the same file for this revision at the same moment.
        winner = LoadTestReport.objects.filter(revision=revision, raw_sha256=sha256).first()
        if winner is None:
            _delete_quietly(storage, stored)
            raise
        if winner.raw_file.name != stored:
            _delete_quietly(storage, stored)
        return winner, False
    except BaseException:
        _delete_quietly(storage, stored)
        raise
    return report, True


def _event_payload(report: LoadTestReport) -> dict[str, Any]:
    origin = report.results.get("origin")
    peaks = report.results.get("peaks")
    return {
        **({"origin": origin} if origin else {}),
        **({"peaks": peaks} if peaks else {}),
        "revision": report.revision_id,
        "workload": report.workload,
        "filename": report.filename,
        "raw_file": report.raw_file.name,
        "raw_sha256": report.raw_sha256,
        "raw_size": report.raw_size,
        "tool": report.tool,
        "tool_version": report.tool_version,
        "format": report.format,
        "source": report.source,
        "fingerprint": report.fingerprint,
        "hardware": report.hardware,
        "measured_at": report.measured_at,
        "levels": report.level_count,
        "requests": report.requests,
        "error_rate": report.error_rate,
        "ttft_p95_ms": report.ttft_p95_ms,
        "tpot_p95_ms": report.tpot_p95_ms,
        "goodput": report.goodput,
        "goodput_slo": report.goodput_slo,
        # The recorded override: what differed and the reason it was attached anyway.
        "mismatch": report.mismatch or None,
        "model_verified": report.model_verified,
    }
