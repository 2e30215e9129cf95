"""What PostgreSQL can store, checked before it is asked to.

PostgreSQL text and jsonb hold any Unicode character except NUL (U+0000), and
only valid Unicode: an unpaired UTF-16 surrogate (U+D800 to U+DFFF, which a JSON
escape such as "\\ud800" produces) cannot be encoded. psycopg refuses the first
in any query parameter, PostgreSQL the second (and a \\u0000 escape in jsonb);
timestamps take a time-zone offset up to ±15:59. Each would otherwise end a
request in a DataError, i.e. a 500. Python's JSON encoder recurses, so JSON is
also kept shallow enough to be written back out.

The functions here only find the problem and name where it is (a JSON path such
as ``launch_parameters.served-name`` or ``messages[0].content``); the forms, the
API parsers and the importers turn that into their own kind of refusal.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError

ALLOWED_TEXT = (
    "text may hold any Unicode character except NUL (U+0000) and unpaired surrogates "
    "(U+D800 to U+DFFF)"
)
# Deep enough for any JSON schema a check declares; shallow enough that Django's
# json.dumps (recursive, inside a deep call stack) never hits the recursion limit.
MAX_JSON_DEPTH = 64
MAX_UTC_OFFSET = dt.timedelta(hours=15, minutes=59)
# Python's json module recurses; past its recursion limit it raises RecursionError.
TOO_DEEP_TO_PARSE = (
    f"the JSON is nested more than Python's parser can follow; JSON may nest at most "
    f"{MAX_JSON_DEPTH} levels"
)

_SURROGATE = re.compile("[\ud800-\udfff]")
_PLAIN_KEY = re.compile(r"^[A-Za-z_][-A-Za-z0-9_]*$")

Path = tuple[str | int, ...]


def text_problem(text: str) -> str | None:
    """Why PostgreSQL cannot store this text, or None when it can."""
    if "\x00" in text:
        return "contains a NUL character (U+0000)"
    surrogate = _SURROGATE.search(text)
    if surrogate:
        return f"contains an unpaired surrogate (U+{ord(surrogate.group()):04X})"
    return None


def json_path(path: Path) -> str:
    """`("messages", 0, "content")` → ``messages[0].content``; odd keys in brackets."""
    out = ""
    for step in path:
        if isinstance(step, int):
            out += f"[{step}]"
        elif _PLAIN_KEY.match(step):
            out += f".{step}" if out else step
        else:
            # ensure_ascii writes NUL and surrogates as escapes a reader can see.
            out += f"[{json.dumps(step)}]"
    return out


@dataclass(frozen=True)
class Unstorable:
    """One value that cannot be stored: where it is, and what is wrong with it."""

    path: Path
    problem: str
    allowed: str

    def message(self, prefix: Path = ()) -> str:
        where = json_path((*prefix, *self.path))
        return f"{where + ': ' if where else ''}{self.problem}; {self.allowed}."


def find_unstorable(value: Any, *, max_depth: int | None = MAX_JSON_DEPTH) -> Unstorable | None:
    """The first string (or key) PostgreSQL cannot store in a parsed JSON value, or
    the first place it is nested deeper than `max_depth`. Iterative: the value may
    be nested deeper than Python's recursion limit allows a walk to go."""
    stack: list[tuple[Path, Any]] = [((), value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            problem = text_problem(item)
            if problem:
                return Unstorable(path, problem, ALLOWED_TEXT)
            continue
        if not isinstance(item, dict | list | tuple):
            continue
        if max_depth is not None and len(path) >= max_depth:
            return Unstorable(
                path,
                f"is nested more than {max_depth} levels deep",
                f"JSON may nest at most {max_depth} levels",
            )
        if isinstance(item, dict):
            children = []
            for key, child in item.items():
                problem = text_problem(key) if isinstance(key, str) else None
                if problem:
                    return Unstorable((*path, key), f"the key {problem}", ALLOWED_TEXT)
                children.append(((*path, key), child))
        else:
            children = [((*path, index), child) for index, child in enumerate(item)]
        # Reversed, so the walk reports the first problem in document order.
        stack.extend(reversed(children))
    return None


def validate_storable(value: Any) -> None:
    """A Django validator: the parsed JSON of a form field must be storable."""
    found = find_unstorable(value)
    if found is not None:
        raise ValidationError(found.message(), code="unstorable")


def offset_problem(value: dt.datetime) -> str | None:
    """Why PostgreSQL cannot take this datetime's time-zone offset, or None."""
    offset = value.utcoffset()
    if offset is None or abs(offset) <= MAX_UTC_OFFSET:
        return None
    sign = "-" if offset < dt.timedelta(0) else "+"
    minutes = int(abs(offset).total_seconds()) // 60
    return (
        f"the time-zone offset {sign}{minutes // 60:02d}:{minutes % 60:02d} is out of range; "
        "offsets run from -15:59 to +15:59, e.g. 2026-01-01T00:00:00Z or "
        "2026-01-01T00:00:00+05:30"
    )
