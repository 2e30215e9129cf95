"""A row's number as a URL or a form carries it: ASCII digits, at most 18 of them.

`str.isdigit()` is not the test: it says yes to "²" (which `int()` refuses, a 500) and to
other scripts' digits ("٣", which `int()` reads as 3 though nobody typed a 3 in a URL).
Eighteen digits fit a bigint, so a longer one names no row rather than reaching the
database as a number it cannot compare."""

from __future__ import annotations

import re

ROW_ID = re.compile(r"[0-9]{1,18}")


def row_id(text: str | None) -> int | None:
    """The number `text` spells, or None when it spells none."""
    if text is None or not ROW_ID.fullmatch(text):
        return None
    return int(text)
