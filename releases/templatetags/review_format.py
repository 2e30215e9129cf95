"""How a review trigger's numbers read on a page: one row per number, nested findings
(reports, runs, license changes) flattened into a sentence each."""

from __future__ import annotations

from typing import Any

from django import template

register = template.Library()

# Ids that the page turns into links already; a row of them would say nothing more.
_HIDDEN = {"revision_number", "target_number", "baseline_report", "last_review", "asset"}


def _text(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1000 else f"{value:,.1f}"
    if isinstance(value, dict):
        return ", ".join(f"{k.replace('_', ' ')} {_text(v)}" for k, v in value.items())
    if isinstance(value, list):
        return "; ".join(_text(item) for item in value) or "none"
    return str(value)


@register.filter
def number_rows(numbers: Any) -> list[tuple[str, str]]:
    """[(label, text)] of a trigger's numbers, in the order they were recorded."""
    if not isinstance(numbers, dict):
        return []
    return [
        (name.replace("_", " "), _text(value))
        for name, value in numbers.items()
        if name not in _HIDDEN
    ]
