"""Two scrapes of an engine (or DCGM) taken around a load test, read for its peaks.

The import verb, the upload form and `import_loadtest --metrics-before/--metrics-after`
hand the two files here; a refusal is a ValidationError keyed by the field
(`metrics_before`, `metrics_after`) naming the file and, where the text cannot be
read, the line. Nothing is written: the import calls this before it stores anything.
"""

from __future__ import annotations

from typing import IO

from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _

from ledger.metrics_import import (
    MAX_SCRAPE_BYTES,
    ExpositionError,
    PeakError,
    Peaks,
    Scrape,
    parse_exposition,
    scrape_peaks,
)
from ledger.metrics_import.peaks import expected_metrics

FIELDS = ("metrics_before", "metrics_after")


def _name(file: IO[bytes], field: str) -> str:
    return str(getattr(file, "name", "") or field)


def _read(file: IO[bytes], field: str) -> Scrape:
    name = _name(file, field)
    file.seek(0)
    data = file.read(MAX_SCRAPE_BYTES + 1)
    if len(data) > MAX_SCRAPE_BYTES:
        message = _(
            "%(filename)s: the scrape is larger than %(mb)s MB; an engine's /metrics is "
            "far smaller: was the right file chosen?"
        ) % {"filename": name, "mb": f"{MAX_SCRAPE_BYTES / 1024 / 1024:g}"}
        raise ValidationError({field: ValidationError(message, code="too_large")})
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        message = _("%(filename)s, line %(line)s: not UTF-8 text (%(reason)s).") % {
            "filename": name,
            "line": line,
            "reason": exc.reason,
        }
        raise ValidationError({field: ValidationError(message, code="invalid")}) from exc
    try:
        return parse_exposition(text, source=name)
    except ExpositionError as exc:
        message = _("%(error)s. Expected Prometheus exposition text, as /metrics serves it.") % {
            "error": exc
        }
        raise ValidationError({field: ValidationError(message, code="invalid")}) from exc


def read_scrape_peaks(metrics_before: IO[bytes] | None, metrics_after: IO[bytes] | None) -> Peaks:
    """The peaks two scrapes show (`ledger.metrics_import.scrape_peaks`); {} when neither
    file is given. Both or none: one alone is refused, keyed by the missing one."""
    if metrics_before is None and metrics_after is None:
        return {}
    if metrics_before is None or metrics_after is None:
        missing = "metrics_before" if metrics_before is None else "metrics_after"
        message = _(
            "Give both scrapes, the one before the test and the one after it: peaks are "
            "read from the two together."
        )
        raise ValidationError({missing: ValidationError(message, code="required")})
    before = _read(metrics_before, "metrics_before")
    after = _read(metrics_after, "metrics_after")
    try:
        peaks = scrape_peaks(before, after)
    except PeakError as exc:
        raise ValidationError(
            {f"metrics_{exc.scrape}": ValidationError(str(exc), code="invalid")}
        ) from exc
    if not peaks:
        message = _(
            "Neither scrape holds a GPU memory or KV-cache usage gauge; expected one of "
            "%(metrics)s (DCGM exporter or the engine's /metrics)."
        ) % {"metrics": expected_metrics()}
        raise ValidationError(
            {field: ValidationError(message, code="no_peaks") for field in FIELDS}
        )
    return peaks
