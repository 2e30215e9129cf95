"""How replay's numbers read on a page: milliseconds, rates and signed changes.

floatformat rounds half up, as the templates do everywhere, so a table and the
chart beside it agree to the digit. The queries hand over raw numbers.
"""

from __future__ import annotations

from typing import Any

from django import template
from django.template.defaultfilters import floatformat
from django.utils.translation import gettext as _

register = template.Library()


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _signed(value: float) -> str:
    text = floatformat(value, 1)
    return text if text.startswith("-") else f"+{text}"


@register.filter
def ms(value: Any) -> str:
    """12.3 ms, or a dash."""
    return "—" if _number(value) is None else f"{floatformat(value, 1)} ms"


@register.filter
def rate_pct(value: Any) -> str:
    """A fraction as a percentage: 0.925 → 92.5 %, or a dash."""
    number = _number(value)
    return "—" if number is None else f"{floatformat(number * 100, 1)} %"


@register.filter
def measure(value: Any, unit: str) -> str:
    """A comparison row's A or B value in its unit ("rate" or "ms")."""
    return rate_pct(value) if unit == "rate" else ms(value)


@register.filter
def change(row: dict[str, Any]) -> str:
    """A comparison row's change: "+4.2 pts" for a rate, "+298.1 ms (+292.5 %)" for a latency."""
    delta = _number(row.get("delta"))
    if delta is None:
        return "—"
    if row.get("unit") == "rate":
        return _("%(points)s pts") % {"points": _signed(delta * 100)}
    text = f"{_signed(delta)} ms"
    pct = _number(row.get("change_pct"))
    return f"{text} ({_signed(pct)} %)" if pct is not None else text
