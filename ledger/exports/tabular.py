"""Rows as CSV or JSON Lines, streamed: one row in memory at a time, whatever the period.

CSV cells that a spreadsheet would read as a formula (starting with = + - @, their
full-width forms, which spreadsheets read the same, or a tab or carriage return before
one) are prefixed with a single quote, the OWASP advice; JSON
Lines keep every value as it is. Moments are written in UTC as RFC 3339 with the
fraction of a second only as long as it needs to be (none when it is zero), the way
PostgreSQL writes a timestamp: the events' CSV is written by PostgreSQL's COPY, and the
two paths must agree.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

FORMULA_STARTS = (
    *("=", "+", "-", "@", "\t", "\r"),
    *("\uff1d", "\uff0b", "\uff0d", "\uff20"),  # the full-width = + - @
)


def spreadsheet_safe(value: Any) -> Any:
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def utc_moment(value: dt.datetime) -> str:
    """`2026-03-05T12:00:00+00:00`, `2026-03-05T12:00:00.25+00:00`."""
    moment = value.astimezone(dt.UTC)
    text = moment.isoformat()
    if moment.microsecond:
        # The fraction holds a digit other than zero, so stripping stops inside it.
        text = text[:-6].rstrip("0") + text[-6:]
    return text


def _plain(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return utc_moment(value)
    if isinstance(value, dt.date):
        return value.isoformat()
    return value


def csv_lines(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> Iterator[str]:
    """A header row, then one CSV line per row (UTF-8 text, RFC 4180 quoting, lines
    ending in \\n as PostgreSQL's COPY writes them)."""
    buffer = io.StringIO()
    # The csv module quotes a cell holding a line break only if the break is part of
    # its line terminator: with "\r\n" a lone \r is quoted too. Each row's "\r\n" is
    # then turned into "\n".
    writer = csv.writer(buffer, lineterminator="\r\n")

    def write(cells: Sequence[Any]) -> None:
        writer.writerow(cells)
        buffer.seek(buffer.tell() - 2)
        buffer.write("\n")
        buffer.truncate()

    write(columns)
    for row in rows:
        write([spreadsheet_safe(_plain(v)) for v in row])
        if buffer.tell() > 64 * 1024:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()


def jsonl_lines(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> Iterator[str]:
    """One JSON object per line, keys in column order."""
    for row in rows:
        record = {c: _plain(v) for c, v in zip(columns, row, strict=True)}
        yield json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
