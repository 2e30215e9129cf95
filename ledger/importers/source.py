"""Reading an uploaded file: bounded in size, peekable for detection, then
either loaded whole (JSON) or streamed line by line (JSON Lines, CSV)."""

from __future__ import annotations

import csv
import io
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any, Literal

import orjson

from lib.storable import find_unstorable, json_path

from .errors import ReportFormatError

Input = bytes | bytearray | memoryview | str | os.PathLike[str] | IO[bytes]

HEAD_BYTES = 64 * 1024
_CHUNK = 1024 * 1024
_BOM = b"\xef\xbb\xbf"
_NOT_SPACE = re.compile(rb"\S")
# Reports saved in a wide encoding by mistake (PowerShell's `>` writes UTF-16):
# a byte-order mark, UTF-32's first since UTF-32LE's starts with UTF-16LE's...
_WIDE_BOMS = (
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"),
    (b"\xfe\xff", "UTF-16"),
)
# ...or, without one, ASCII characters with NUL bytes between them.
_WIDE_ASCII = (
    (re.compile(rb"(?:[\x01-\x7f]\x00{3}){2}|(?:\x00{3}[\x01-\x7f]){2}"), "UTF-32"),
    (re.compile(rb"(?:[\x01-\x7f]\x00){2}|(?:\x00[\x01-\x7f]){2}"), "UTF-16"),
)


class Source:
    """A binary stream with a read-ahead buffer and a byte budget."""

    def __init__(self, stream: IO[bytes], *, filename: str, max_bytes: int | None = None) -> None:
        self.filename = filename
        self.max_bytes = max_bytes
        self._stream = stream
        # Grown in place: a one-line JSON of many MB is read ahead in chunks.
        self._buffer = bytearray()
        self._read_bytes = 0
        self._eof = False
        self._started = False

    def close(self) -> None:
        self._stream.close()

    def error(self, location: str | None, message: str) -> ReportFormatError:
        return ReportFormatError(self.filename, location, message)

    def _too_big(self) -> ReportFormatError:
        return self.error(None, f"the file is larger than the limit of {self.max_bytes:,} bytes")

    def _read(self, size: int) -> bytes:
        if self.max_bytes is not None:
            # One byte past the budget is enough to know it is over.
            size = max(0, min(size, self.max_bytes + 1 - self._read_bytes)) or 1
        chunk = self._stream.read(size)
        if isinstance(chunk, str):
            raise TypeError("load-test files must be opened in binary mode")
        if not chunk:
            self._eof = True
            return b""
        self._read_bytes += len(chunk)
        if self.max_bytes is not None and self._read_bytes > self.max_bytes:
            raise self._too_big()
        if not self._started:
            self._started = True
            # A byte-order mark (Excel writes one) is not content.
            if chunk.startswith(_BOM):
                chunk = chunk[len(_BOM) :]
        return chunk

    def peek(self, size: int) -> bytes:
        while len(self._buffer) < size and not self._eof:
            self._buffer += self._read(max(size - len(self._buffer), HEAD_BYTES))
        return bytes(self._buffer[:size])

    @property
    def exhausted(self) -> bool:
        """True when everything has been read into the buffer."""
        return self._eof

    def first_line(self) -> tuple[int, bytes]:
        """(offset, the first non-blank line), without consuming it."""
        searched = 0
        while True:
            found = _NOT_SPACE.search(self._buffer)
            if found is not None:
                start = found.start()
                end = self._buffer.find(b"\n", max(start, searched))
                if end >= 0 or self._eof:
                    return start, bytes(self._buffer[start : end + 1 if end >= 0 else None])
                searched = len(self._buffer)
            elif self._eof:
                return len(self._buffer), b""
            self._buffer += self._read(_CHUNK * 8)

    def blank_after(self, offset: int) -> bool:
        """Whether nothing but whitespace follows the first `offset` bytes."""
        while True:
            if _NOT_SPACE.search(self._buffer, offset):
                return False
            if self._eof:
                return True
            offset = len(self._buffer)
            self._buffer += self._read(_CHUNK)

    def read_all(self) -> bytes:
        parts = [bytes(self._buffer)]
        self._buffer = bytearray()
        while not self._eof:
            parts.append(self._read(_CHUNK * 8))
        return b"".join(parts)

    def lines(self) -> Iterator[tuple[int, bytes]]:
        """(line number, line with its newline) from the start of the file.

        Reads in chunks through `read()` only: iterating an upload object
        itself may rewind it (Django's File.__iter__ seeks to 0).
        """
        number = 0
        data = bytes(self._buffer)
        self._buffer = bytearray()
        while True:
            parts = data.split(b"\n")
            tail = parts.pop()
            for part in parts:
                number += 1
                yield number, part + b"\n"
            chunk = b"" if self._eof else self._read(_CHUNK)
            if not chunk:
                if tail:
                    yield number + 1, tail
                return
            data = tail + chunk

    def text_lines(self) -> Iterator[str]:
        for number, line in self.lines():
            try:
                yield line.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise self.error(f"line {number}", f"not UTF-8 text ({exc.reason})") from None


def open_source(data: Input, *, filename: str, max_bytes: int | None) -> tuple[Source, bool]:
    """A Source over bytes, a path, or a binary stream; and whether to close it."""
    if isinstance(data, bytes | bytearray | memoryview):
        stream: IO[bytes] = io.BytesIO(bytes(data))
        return Source(stream, filename=filename, max_bytes=max_bytes), True
    if isinstance(data, str | os.PathLike):
        size = os.stat(data).st_size
        if max_bytes is not None and size > max_bytes:
            raise ReportFormatError(
                filename,
                None,
                f"the file is {size:,} bytes, over the limit of {max_bytes:,} bytes",
            )
        stream = open(data, "rb")  # noqa: SIM115 - closed by the caller
        return Source(stream, filename=filename, max_bytes=max_bytes), True
    if hasattr(data, "read"):
        return Source(data, filename=filename, max_bytes=max_bytes), False
    raise TypeError(f"cannot read a load-test report from {type(data).__name__}")


def loads(data: bytes, source: Source, *, line: int | None = None) -> Any:
    """Parse JSON; errors name the line and column, or the JSON path of text
    PostgreSQL could not store (a \\u0000, an unpaired surrogate).

    orjson first, for speed; the standard library when orjson refuses, because
    Python-written reports contain bare NaN and Infinity (SGLang's request_rate).
    Not for JSON nested past orjson's limit of 1024 levels: the standard library
    would recurse until Python's own limit stops it.
    """
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if exc.msg.startswith("depth limit exceeded"):
            raise source.error(
                _where(line, exc), f"the JSON is nested more than {_ORJSON_MAX_DEPTH} levels deep"
            ) from None
    else:
        # orjson refuses unpaired surrogates itself; a NUL can only come escaped.
        if b"\\u0000" in data:
            _refuse_unstorable(doc, source, line)
        return doc
    try:
        doc = json.loads(data)
    except UnicodeDecodeError as exc:
        where = f"line {line}" if line else None
        raise source.error(where, f"not UTF-8 text ({exc.reason})") from None
    except RecursionError:
        where = f"line {line}" if line else None
        raise source.error(
            where, f"the JSON is nested more than {_ORJSON_MAX_DEPTH} levels deep"
        ) from None
    except json.JSONDecodeError as exc:
        # An unterminated string runs to the end of the data: the file was cut short.
        truncated = exc.pos >= len(data.rstrip()) or exc.msg.startswith("Unterminated string")
        what = "the JSON ends early (truncated file?)" if truncated else "invalid JSON"
        raise source.error(_where(line, exc), f"{what}: {exc.msg}") from None
    # The standard library lets "\\ud800" (and CESU-8 bytes) through as lone surrogates.
    _refuse_unstorable(doc, source, line)
    return doc


_ORJSON_MAX_DEPTH = 1024


def _where(line: int | None, exc: json.JSONDecodeError) -> str:
    return f"line {line if line is not None else exc.lineno}, column {exc.colno}"


def _refuse_unstorable(doc: Any, source: Source, line: int | None) -> None:
    found = find_unstorable(doc, max_depth=None)
    if found is None:
        return
    path = json_path(found.path)
    where = f"line {line}: {path}" if line and path else (f"line {line}" if line else path)
    raise source.error(where or None, f"{found.problem}; {found.allowed}")


@dataclass
class Probe:
    """What the start of a file looks like, for detection.

    kind "json": `doc` is the whole parsed document. "jsonl": `first` is the
    first record and the rest is still to be streamed. "csv": `header` is the
    first row, split.
    """

    source: Source
    kind: Literal["json", "jsonl", "csv"]
    doc: Any = None
    first: dict[str, Any] | None = None
    header: list[str] | None = None

    def record(self) -> dict[str, Any] | None:
        """The object a one-object-per-run format starts with, whichever kind."""
        if self.kind == "jsonl":
            return self.first
        if self.kind == "json" and isinstance(self.doc, dict):
            return self.doc
        return None


def _wide_encoding(head: bytes) -> str | None:
    """The wide encoding (UTF-16 or UTF-32) the start of a file is in, if any."""
    for bom, name in _WIDE_BOMS:
        if head.startswith(bom):
            return name
    for pattern, name in _WIDE_ASCII:
        if pattern.match(head):
            return name
    return None


def probe(source: Source) -> Probe:
    head = source.peek(HEAD_BYTES)
    encoding = _wide_encoding(head)
    if encoding:
        raise source.error(None, f"the file is {encoding}; save it as UTF-8")
    text = head.lstrip()
    if not text:
        if source.exhausted:
            raise source.error(None, "the file is empty")
        raise source.error(None, "the file starts with 64 KB of blank space")
    if text[:1] == b"[":
        return Probe(source, "json", doc=loads(source.read_all(), source))
    if text[:1] == b"{":
        offset, line = source.first_line()
        record = _try_loads(line, source)
        if isinstance(record, dict):
            if source.blank_after(offset + len(line)):
                return Probe(source, "json", doc=record)
            return Probe(source, "jsonl", first=record)
        return Probe(source, "json", doc=loads(source.read_all(), source))
    try:
        first = source.first_line()[1].decode("utf-8")
    except UnicodeDecodeError:
        raise source.error(
            None, "not a text file: expected UTF-8 text (JSON, JSON Lines or CSV)"
        ) from None
    header = next(csv.reader([first]), [])
    return Probe(source, "csv", header=[cell.strip() for cell in header])


def _try_loads(data: bytes, source: Source) -> Any:
    """`loads`, or None where `data` is no JSON on its own (the first line of an
    indented document)."""
    try:
        return loads(data, source)
    except ReportFormatError:
        return None
