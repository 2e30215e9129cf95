"""How the registry's numbers and values read on a page: units, SLO bounds, loads in words, JSON.

The queries hand over numbers; these filters are the only place they become text.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any

from django import template
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext, pgettext_lazy

from ledger import event_actions
from ledger.roles import Role

register = template.Library()

# The CSS class of each attainment word of the SLO matrix (the word itself is shown too).
WORD_CLASSES = {
    "met": "ok",
    "breached": "bad",
    "stale": "warn",
    "mismatched": "bad",
    "unverified": "warn",
    "no SLO": "none",
    "no evidence": "none",
}
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
LOAD_AXES = {
    "concurrency": (pgettext_lazy("load axis", "concurrency"), ""),
    "request_rate": (pgettext_lazy("load axis", "request rate"), "req/s"),
    "requests_per_s": (pgettext_lazy("load axis", "achieved request rate"), "req/s"),
}
# The state words the registry stores and the pages show as they are (a badge's text):
# each in the reader's language. Unknown words are shown unchanged.
WORDS = {
    # The actor of what no person did (ledger.chain's actor label for None).
    "system": pgettext_lazy("actor", "system"),
    "active": pgettext_lazy("state word", "active"),
    "deprecated": pgettext_lazy("state word", "deprecated"),
    "retired": pgettext_lazy("state word", "retired"),
    "declared": pgettext_lazy("state word", "declared"),
    "verified": pgettext_lazy("state word", "verified"),
    "failed": pgettext_lazy("state word", "failed"),
    "approved": pgettext_lazy("state word", "approved"),
    "rejected": pgettext_lazy("state word", "rejected"),
    "accepted": pgettext_lazy("state word", "accepted"),
    "pending": pgettext_lazy("state word", "pending"),
    "breach": pgettext_lazy("state word", "breach"),
    "warning": pgettext_lazy("state word", "warning"),
    "current": pgettext_lazy("state word", "current"),
    "stale": pgettext_lazy("state word", "stale"),
    "mismatched": pgettext_lazy("state word", "mismatched"),
    "unverified": pgettext_lazy("state word", "unverified"),
    "met": pgettext_lazy("state word", "met"),
    "breached": pgettext_lazy("state word", "breached"),
    "no SLO": pgettext_lazy("state word", "no SLO"),
    "no evidence": pgettext_lazy("state word", "no evidence"),
    "slower": pgettext_lazy("state word", "slower"),
    "faster": pgettext_lazy("state word", "faster"),
    "production": pgettext_lazy("state word", "production"),
    "internal": pgettext_lazy("state word", "internal"),
    "experimental": pgettext_lazy("state word", "experimental"),
}


@register.filter
def metric_value(value: float | None, unit: str) -> str:
    """800.0 ms, 1.25 %, 12.5 %; a dash when there is no value."""
    if value is None:
        return "—"
    if unit == "%":
        return f"{value:,.2f} %" if value < 10 else f"{value:,.1f} %"
    return f"{value:,.1f} {unit}"


@register.filter
def slo_bound(cell: dict[str, Any]) -> str:
    """A matrix cell's SLO as it was set: "SLO ≤ 800 ms", "SLO ≥ 95 %"; empty without one."""
    if cell.get("slo") is None:
        return ""
    sign = "≥" if cell["bound"] == "min" else "≤"
    return f"SLO {sign} {cell['slo']:,.10g} {cell['unit']}"


@register.filter
def word(value: Any) -> str:
    """A stored state word (active, verified, breached …) in the reader's language."""
    return str(WORDS.get(value, value)) if isinstance(value, str) else value


@register.filter
def action_label(action: str) -> str:
    """An event's recorded action (`release.submitted`) as a page reads it."""
    return event_actions.action_label(action)


@register.filter
def role_label(role: str) -> str:
    """A role's key (`platform_sre`) by its name, in the reader's language."""
    return str(Role(role).label) if role in Role.values else role


@register.filter
def word_css(word: str) -> str:
    return WORD_CLASSES.get(word, "none")


@register.filter
def load_words(conditions: dict[str, Any]) -> str:
    """What load a level ran under: 'concurrency 8', '2.5 req/s', 'unlimited rate'."""
    parts = []
    if conditions.get("concurrency") is not None:
        parts.append(gettext("concurrency %(count)s") % {"count": f"{conditions['concurrency']:g}"})
    if conditions.get("request_rate") is not None:
        parts.append(f"{conditions['request_rate']:g} req/s")
    elif conditions.get("request_rate_unlimited"):
        parts.append(gettext("unlimited rate"))
    return ", ".join(parts)


@register.filter
def capacity_load(capacity: dict[str, Any]) -> str:
    """The capacity's load in words: 'concurrency 8', 'request rate 1 req/s'."""
    load = capacity.get("load")
    if load is None:
        return ""
    name, unit = LOAD_AXES.get(capacity.get("axis") or "", (pgettext_lazy("load axis", "load"), ""))
    return f"{name} {load:g}" if not unit else f"{name} {load:.3g} {unit}"


@register.filter
def as_json(value: Any) -> str:
    """A JSON value as compact text with sorted keys (the template escapes it)."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


@register.filter
def change_value(value: Any) -> str:
    """A before or after value of an event: text as is, "(empty)", or compact JSON."""
    if value is None or value == "":
        return gettext("(empty)")
    if isinstance(value, str):
        return value
    return as_json(value)


@register.filter
def component_value(value: Any) -> Any:
    """A fingerprint component: objects (launch parameters) as JSON, the rest as they are."""
    return json.dumps(value, sort_keys=True) if isinstance(value, dict) else value


@register.filter
def diff_value(value: Any, field: str = "") -> str:
    """A from or to value of a revision diff: names comma-separated, true/false, JSON;
    "not declared" (a capability) or "not set" when there is none."""
    if value is None:
        return gettext("not declared") if field.startswith("capabilities.") else gettext("not set")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return ", ".join(value) or gettext("none")
    return as_json(value)


@register.filter
def is_digest(value: Any) -> bool:
    """A `sha256:` digest, which a page shortens (it opens to the full value)."""
    return isinstance(value, str) and DIGEST.fullmatch(value) is not None


@register.simple_tag
def moment(value: Any) -> SafeString | str:
    """A moment in the reader's time zone, `<time datetime="2026-12-03T18:20:05+00:00">
    2026-12-03 18:20 UTC</time>`: what `date:'c'` and `date:"Y-m-d H:i T"` write, in
    about a third of their time (50 us against 130-160; a list shows one a row).
    Nothing for no moment."""
    if not isinstance(value, dt.datetime):
        return ""
    if timezone.is_aware(value):
        local = timezone.localtime(value)
        zone = local.tzname()
    else:
        local, zone = value, timezone.get_default_timezone().tzname(value)
    return format_html(
        '<time datetime="{}">{} {}</time>',
        local.isoformat(),
        local.strftime("%Y-%m-%d %H:%M"),
        zone or "",
    )
