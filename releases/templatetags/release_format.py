"""How rollout guards, stages and rollbacks read on a page."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django import template

from releases.guards import GUARD_METRICS, GuardSpec, guard_specs

register = template.Library()


def describe(spec: GuardSpec) -> str:
    """e.g. "≤ 900 ms · ≤ +20 % of live · critical"."""
    metric = GUARD_METRICS[spec["metric"]]
    parts = []
    if spec["max"] is not None:
        sign = "≤" if metric.higher_is_worse else "≥"
        parts.append(f"{sign} {spec['max']:g} {metric.unit}")
    if spec["max_increase_pct"] is not None:
        parts.append(f"≤ {spec['max_increase_pct']:+g} % of live")
    if spec["min_requests"]:
        parts.append(f"judged from {spec['min_requests']} requests")
    if spec["critical"]:
        parts.append("critical")
    if spec["dry_run"]:
        parts.append("dry run")
    return " · ".join(parts) or "no bound"


@register.filter
def guard_text(spec: GuardSpec) -> str:
    return describe(spec)


@register.filter
def plan_guard(guards: dict[str, Any] | None, metric: str) -> str:
    """One guard of a gray-plan stage as the form wrote it, or a dash."""
    found = [s for s in guard_specs(guards) if s["metric"] == metric]
    return describe(found[0]) if found else "—"


@register.filter
def guard_label(metric: str) -> str:
    known = GUARD_METRICS.get(metric)
    return known.label if known else metric


@register.filter
def minutes(duration: dt.timedelta | None) -> str:
    """A duration in words: "12 min", "1 h 5 min", "40 s"."""
    if duration is None:
        return "—"
    seconds = int(duration.total_seconds())
    if seconds < 60:
        return f"{seconds} s"
    hours, rest = divmod(seconds // 60, 60)
    return f"{hours} h {rest} min" if hours else f"{rest} min"
