"""The summary CSV AIPerf and GenAI-Perf both write: tables headed `Metric,...`
with one row per metric, the unit in parentheses after its name."""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass

from .report import Conditions, LatencyStats, Level, Throughput, TokenStats
from .source import Source
from .stats import level_name

_NAME_UNIT = re.compile(r"^(.*?)(?: \(([^()]*)\))?$")
TO_MS = {"ms": 1.0, "sec": 1000.0, "s": 1000.0, "us": 1e-3, "ns": 1e-6}


@dataclass
class Row:
    name: str
    unit: str | None
    values: dict[str, float | None]
    line: int


def read(source: Source) -> dict[str, Row]:
    """Rows by lower-cased metric name ("time to first token")."""
    rows: dict[str, Row] = {}
    header: list[str] = []
    at_table_start = True
    reader = csv.reader(source.text_lines())
    for cells in reader:
        cells = [c.strip() for c in cells]
        if not any(cells):
            at_table_start = True
            continue
        if at_table_start:
            # Tables are separated by blank lines; only those headed Metric,... are
            # summaries (AIPerf appends a GPU telemetry table headed Endpoint,...).
            at_table_start = False
            header = cells if cells[0] == "Metric" else []
            continue
        if not header:
            continue
        match = _NAME_UNIT.match(cells[0])
        assert match is not None
        values: dict[str, float | None] = {}
        for column, text in zip(header[1:], cells[1:], strict=False):
            try:
                # GenAI-Perf writes thousands separators: "1,565.62".
                values[column] = float(text.replace(",", "")) if text else None
            except ValueError:
                raise source.error(
                    f"line {reader.line_num}",
                    f"{cells[0]} {column}: expected a number, found {text!r}",
                ) from None
        name = match.group(1)
        rows[name.lower()] = Row(name, match.group(2), values, reader.line_num)
    return rows


def value(rows: dict[str, Row], name: str) -> float | None:
    """The single value of a Metric,Value row (or the avg of a statistics row)."""
    row = rows.get(name.lower())
    if row is None:
        return None
    return row.values["Value"] if "Value" in row.values else row.values.get("avg")


def latency(source: Source, rows: dict[str, Row], name: str) -> LatencyStats:
    row = rows.get(name.lower())
    if row is None:
        return LatencyStats()
    scale = TO_MS.get(row.unit or "ms")
    if scale is None:
        raise source.error(f"line {row.line}", f"{row.name}: unknown time unit {row.unit!r}")
    out: dict[str, float | None] = {}
    for ours, theirs in (
        ("mean", "avg"),
        ("p50", "p50"),
        ("p90", "p90"),
        ("p95", "p95"),
        ("p99", "p99"),
        ("max", "max"),
    ):
        number = row.values.get(theirs)
        if number is not None and not number >= 0:
            raise source.error(
                f"line {row.line}",
                f"{row.name} {theirs}: latency is {number!r}: expected at least 0",
            )
        out[ours] = None if number is None else number * scale
    return LatencyStats(**out)


def tokens(rows: dict[str, Row], name: str) -> TokenStats:
    row = rows.get(name.lower())
    if row is None:
        return TokenStats()
    return TokenStats(
        mean=row.values.get("avg"), p50=row.values.get("p50"), p90=row.values.get("p90")
    )


def summary_level(
    source: Source, rows: dict[str, Row], cond: Conditions, latencies: dict[str, str]
) -> Level:
    """The one load level of an AIPerf or GenAI-Perf summary CSV.

    `latencies` maps a Level attribute (ttft, tpot, itl, e2e) to the tool's row name.
    """
    cond.prompt_tokens = tokens(rows, "Input Sequence Length")
    cond.output_tokens = tokens(rows, "Output Sequence Length")
    level = Level(
        name=level_name(cond),
        source="tool",
        conditions=cond,
        throughput=Throughput(
            requests_per_s=value(rows, "Request Throughput"),
            output_tokens_per_s=value(rows, "Output Token Throughput"),
            total_tokens_per_s=value(rows, "Total Token Throughput"),
        ),
    )
    for attr, name in latencies.items():
        setattr(level, attr, latency(source, rows, name))
    if level.ttft.is_empty() and level.e2e.is_empty():
        raise source.error(None, "no latency rows: expected e.g. 'Request Latency (ms)'")
    return level
