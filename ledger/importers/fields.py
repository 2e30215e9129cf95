"""Typed reads from a parsed JSON document whose errors name the JSON path."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from .errors import ReportFormatError
from .source import Probe, Source, loads

Key = str | int
_MISSING = object()


def path_str(path: tuple[Key, ...]) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out or "(top level)"


def describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"the string {shown!r}"
    return repr(value)


class Node:
    """A value inside a JSON document, with the path that leads to it.

    `line` is set for a record of a JSON Lines file, so that errors say
    "line 7: metrics.request_latency.value".
    """

    __slots__ = ("line", "path", "source", "value")

    def __init__(
        self, value: Any, source: Source, path: tuple[Key, ...] = (), line: int | None = None
    ) -> None:
        self.value = value
        self.source = source
        self.path = path
        self.line = line

    def location(self, *keys: Key) -> str:
        where = path_str(self.path + keys)
        return f"line {self.line}: {where}" if self.line is not None else where

    def error(self, message: str, *keys: Key) -> ReportFormatError:
        return self.source.error(self.location(*keys), message)

    def _lookup(self, key: Key) -> Any:
        value = self.value
        if isinstance(key, int):
            if isinstance(value, list) and -len(value) <= key < len(value):
                return value[key]
            return _MISSING
        if isinstance(value, dict):
            return value.get(key, _MISSING)
        return _MISSING

    def has(self, key: Key) -> bool:
        return self._lookup(key) not in (_MISSING, None)

    def raw(self, key: Key, default: Any = None) -> Any:
        value = self._lookup(key)
        return default if value is _MISSING else value

    def get(self, key: Key, *, required: bool = True) -> Node | None:
        value = self._lookup(key)
        if value is _MISSING or value is None:
            if required:
                raise self.error("required field is missing", key)
            return None
        return Node(value, self.source, (*self.path, key), self.line)

    def obj(self, key: Key, *, required: bool = True) -> Node | None:
        node = self.get(key, required=required)
        if node is not None and not isinstance(node.value, dict):
            raise node.error(f"expected an object, found {describe(node.value)}")
        return node

    def items(self, key: Key, *, required: bool = True) -> list[Node]:
        node = self.get(key, required=required)
        if node is None:
            return []
        if not isinstance(node.value, list):
            raise node.error(f"expected a list, found {describe(node.value)}")
        return [Node(v, self.source, (*node.path, i), self.line) for i, v in enumerate(node.value)]

    def num(self, key: Key, *, required: bool = False) -> float | None:
        value = self._lookup(key)
        if value is _MISSING or value is None:
            if required:
                raise self.error("required field is missing: expected a number", key)
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(f"expected a number, found {describe(value)}", key)
        return float(value)

    def count(self, key: Key, *, required: bool = False) -> int | None:
        value = self.num(key, required=required)
        if value is None:
            return None
        if value < 0 or not value.is_integer():
            raise self.error(f"expected a count (a whole number ≥ 0), found {value!r}", key)
        return int(value)

    def latency(self, key: Key, *, scale: float = 1.0, required: bool = False) -> float | None:
        """A latency, checked (not NaN, not negative) and multiplied by `scale`."""
        value = self.num(key, required=required)
        if value is None:
            return None
        check_latency(value, self, key)
        return value * scale

    def text(self, key: Key, *, required: bool = False) -> str | None:
        value = self._lookup(key)
        if value is _MISSING or value is None:
            if required:
                raise self.error("required field is missing: expected a string", key)
            return None
        if not isinstance(value, str):
            raise self.error(f"expected a string, found {describe(value)}", key)
        return value


def check_latency(value: float, node: Node, *keys: Key) -> None:
    if math.isnan(value):
        raise node.error("latency is NaN: expected a number of at least 0", *keys)
    if value < 0:
        raise node.error(f"latency is negative ({value!r}): expected at least 0", *keys)
    if math.isinf(value):
        raise node.error("latency is infinite: expected a finite number", *keys)


def float_array(node: Node, key: Key, length: int | None = None) -> np.ndarray | None:
    """A list of numbers as a float array (null becomes NaN); None when absent."""
    items = node.get(key, required=False)
    if items is None:
        return None
    values = items.value
    if not isinstance(values, list):
        raise items.error(f"expected a list of numbers, found {describe(values)}")
    if length is not None and len(values) != length:
        raise items.error(f"expected {length} entries, one per request, found {len(values)}")
    return numbers(values, items)


def numbers(values: list[Any], node: Node) -> np.ndarray:
    """`values` (a JSON list at `node`) as floats, null as NaN; anything else refused."""
    if not all(type(v) is float or type(v) is int for v in values):
        for i, value in enumerate(values):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int | float)
            ):
                raise node.error(f"expected a number, found {describe(value)}", i)
        values = [math.nan if v is None else v for v in values]
    return np.array(values, dtype=np.float64)


def check_latencies(values: np.ndarray, mask: np.ndarray | None, node: Node, *keys: Key) -> None:
    """Refuse NaN and negative latencies among the `mask`ed (successful) requests."""
    bad = ~(values >= 0)
    if mask is not None:
        bad &= mask
    if bad.any():
        i = int(np.argmax(bad))
        check_latency(float(values[i]), node, *keys, i)


def run_records(probe: Probe) -> Iterator[Node]:
    """The objects of a file holding one result object per run: a JSON object,
    a JSON list of them, or JSON Lines (vLLM --append-result, SGLang)."""
    source = probe.source
    if probe.kind == "json":
        if isinstance(probe.doc, dict):
            yield Node(probe.doc, source)
            return
        root = Node(probe.doc, source)
        for i, value in enumerate(probe.doc):
            if not isinstance(value, dict):
                raise root.error(f"expected an object, found {describe(value)}", i)
            yield Node(value, source, (i,))
        return
    for number, line in source.lines():
        if not line.strip():
            continue
        value = loads(line, source, line=number)
        if not isinstance(value, dict):
            raise source.error(f"line {number}", f"expected a JSON object, found {describe(value)}")
        yield Node(value, source, line=number)
