"""Load-test report importers: the files real benchmark tools write, parsed
into one shape (`ParsedReport`), with latencies in ms and throughput per second.

    report = parse_report(uploaded_file, filename="benchmarks.json")
    report.to_json()

The format is detected from the content; `format=` forces one (a key of
`FORMATS`). Every problem with the file is a `ReportFormatError` naming the
file, the line or JSON path, and what was expected. Nothing here touches the
database or storage.
"""

from __future__ import annotations

from types import ModuleType

from . import aiperf, genai_perf, generic, guidellm, inference_perf, sglang, vllm
from .errors import ReportFormatError
from .report import (
    Conditions,
    LatencyStats,
    Level,
    ParsedReport,
    RequestArrays,
    Throughput,
    TokenStats,
    cdf_points,
)
from .source import Input, Probe, Source, open_source, probe

__all__ = [
    "FORMATS",
    "Conditions",
    "LatencyStats",
    "Level",
    "ParsedReport",
    "ReportFormatError",
    "RequestArrays",
    "Throughput",
    "TokenStats",
    "cdf_points",
    "detect_format",
    "parse_report",
]

# Detection asks each in this order; the specific formats come before the
# loose ones (vLLM's keys are a subset of what others write; generic last).
FORMATS: dict[str, ModuleType] = {
    "aiperf": aiperf,
    "genai_perf": genai_perf,
    "guidellm": guidellm,
    "inference_perf": inference_perf,
    "sglang": sglang,
    "vllm": vllm,
    "generic": generic,
}


def parse_report(
    data: Input,
    *,
    filename: str,
    format: str | None = None,
    max_bytes: int | None = None,
) -> ParsedReport:
    """Parse a load-test report.

    `data` is the file's bytes, a path, or a binary stream (an uploaded file);
    a stream is read from where it stands and not closed. `filename` is only
    used in messages. Raises ReportFormatError for anything wrong with the file,
    including a file over `max_bytes`.
    """
    source, close = open_source(data, filename=filename, max_bytes=max_bytes)
    try:
        found = probe(source)
        name, variant = _resolve(found, format)
        return FORMATS[name].parse(found, variant)
    finally:
        if close:
            source.close()


def detect_format(data: Input, *, filename: str, max_bytes: int | None = None) -> tuple[str, str]:
    """(format, variant) of a file, e.g. ("aiperf", "records-jsonl")."""
    source, close = open_source(data, filename=filename, max_bytes=max_bytes)
    try:
        return _resolve(probe(source), None)
    finally:
        if close:
            source.close()


def _resolve(found: Probe, format: str | None) -> tuple[str, str]:
    source: Source = found.source
    if format is not None:
        module = FORMATS.get(format)
        if module is None:
            raise source.error(
                None, f"unknown format {format!r}: supported formats are {_supported()}"
            )
        variant = module.detect(found)
        if variant is None:
            raise source.error(None, f"not a {format} report: expected {module.EXPECTED}")
        return format, variant
    for name, module in FORMATS.items():
        variant = module.detect(found)
        if variant is not None:
            return name, variant
    raise source.error(
        None,
        f"unknown format: the content matches none of the supported formats ({_supported()})",
    )


def _supported() -> str:
    return ", ".join(FORMATS)
