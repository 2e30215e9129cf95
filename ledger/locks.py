"""Why a registry object may no longer change.

An asset, runtime or revision that has served, or that a release past draft
references, is frozen: a new revision is made instead. Each app registers its
rules in its `AppConfig.ready()` (the releases app adds "referenced by a
release past draft"), so the rule stays one method, `lock_reasons()`, on each
model. A rule answers for many objects of one model at once, so a list page
asks `reasons_for_many` once instead of once per row.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from django.db.models import Model

# A rule: objects of one model → {pk: reasons} (objects with no reason may be left out).
Rule = Callable[[Sequence[Any]], dict[Any, list[str]]]

_RULES: list[Rule] = []


def register(rule: Rule) -> Rule:
    """Add a rule (idempotent, so a `ready()` that runs twice adds it once)."""
    if rule not in _RULES:
        _RULES.append(rule)
    return rule


def unregister(rule: Rule) -> None:
    if rule in _RULES:
        _RULES.remove(rule)


def reasons_for_many(objs: Sequence[Model]) -> dict[Any, list[str]]:
    """The reasons each object is locked, by pk ([] when it is not); objects of one model."""
    reasons: dict[Any, list[str]] = {obj.pk: [] for obj in objs}
    if not objs:
        return reasons
    for rule in _RULES:
        for pk, found in rule(objs).items():
            reasons[pk].extend(found)
    return reasons


def reasons_for(obj: Model) -> list[str]:
    return reasons_for_many([obj])[obj.pk]


def has_served(objs: Sequence[Any]) -> dict[Any, list[str]]:
    """A revision that went live, or an asset or runtime one went live with."""
    from ledger.models import ModelAsset, Revision, Runtime

    first = objs[0]
    if isinstance(first, Revision):
        return {r.pk: [f"{r.label} has served live traffic"] for r in objs if r.served_at}
    if isinstance(first, ModelAsset | Runtime):
        part = "model_asset_id" if isinstance(first, ModelAsset) else "runtime_id"
        served = (
            Revision.objects.filter(
                **{f"{part}__in": [o.pk for o in objs]}, served_at__isnull=False
            )
            .select_related("service")
            .order_by("service__slug", "-number")
        )
        found: dict[Any, list[str]] = {}
        for revision in served:
            # The first revision that served with it names the reason.
            found.setdefault(
                getattr(revision, part),
                [f"{revision.service.slug} {revision.label} has served with it"],
            )
        return found
    return {}
