"""Why a registry object may no longer change.

An asset, runtime or revision that has served, or that a release past draft
references, is frozen: a new revision is made instead. Other apps add rules
(the releases app registers "referenced by a release past draft") with
`register`, so the rule stays one method, `lock_reasons()`, on each model.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_RULES: list[Callable[[Any], list[str]]] = []


def register(rule: Callable[[Any], list[str]]) -> Callable[[Any], list[str]]:
    """Add a rule: a function of one object returning the reasons it is locked."""
    if rule not in _RULES:
        _RULES.append(rule)
    return rule


def reasons_for(obj: Any) -> list[str]:
    reasons: list[str] = []
    for rule in _RULES:
        reasons.extend(rule(obj))
    return reasons


@register
def has_served(obj: Any) -> list[str]:
    from ledger.models import ModelAsset, Revision, Runtime

    if isinstance(obj, Revision):
        return [f"{obj.label} has served live traffic"] if obj.served_at else []
    if isinstance(obj, ModelAsset | Runtime):
        served = obj.revisions.filter(served_at__isnull=False).select_related("service").first()
        if served:
            return [f"{served.service.slug} {served.label} has served with it"]
    return []
