"""The releases app's lock rule: what a release past draft references no longer changes.

Registered with `ledger.locks` in `ReleasesConfig.ready()`. A revision that a
submitted (or later) release names as its candidate or rollback target is
locked, and so are the model asset and runtime of such a candidate. One query
per call, however many objects are asked about.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def referenced_by_release_past_draft(objs: Sequence[Any]) -> dict[Any, list[str]]:
    from django.db.models import Q

    from ledger.models import ModelAsset, Revision, Runtime
    from releases.models import Release

    first = objs[0]
    past_draft = Release.objects.filter(submitted_at__isnull=False)
    found: dict[Any, list[str]] = {}
    if isinstance(first, Revision):
        pks = [o.pk for o in objs]
        rows = (
            past_draft.filter(Q(to_revision__in=pks) | Q(rollback_target__in=pks))
            .order_by("pk")
            .values_list("pk", "state", "to_revision_id", "rollback_target_id")
        )
        for pk, state, to_id, target_id in rows:
            for revision_id in {to_id, target_id} & set(pks):
                found.setdefault(revision_id, [f"release #{pk} ({state}) references it"])
        return found
    if isinstance(first, ModelAsset | Runtime):
        part = "model_asset_id" if isinstance(first, ModelAsset) else "runtime_id"
        rows = (
            past_draft.filter(**{f"to_revision__{part}__in": [o.pk for o in objs]})
            .order_by("pk")
            .values_list("pk", "state", f"to_revision__{part}", "to_revision__number")
        )
        for pk, state, obj_id, number in rows:
            found.setdefault(obj_id, [f"release #{pk} ({state}) of r{number} uses it"])
        return found
    return {}
