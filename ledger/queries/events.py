"""Reading events: what an update changed, before and after."""

from __future__ import annotations

from typing import Any, TypedDict

from ledger.models import Event


class FieldChange(TypedDict):
    field: str
    before: Any
    after: Any


def event_changes(
    event: Event, labels: dict[str, dict[Any, str]] | None = None
) -> list[FieldChange]:
    """The fields an update event changed, before and after (template filter `change_value`
    shows them).

    `labels` turns ids into words for relation fields, e.g. {"live_revision": {12: "r3"}}.
    """
    data = event.payload_data
    before, after = data.get("before"), data.get("after")
    if not isinstance(before, dict) or not isinstance(after, dict):
        return []
    labels = labels or {}

    def named(name: str, value: Any) -> Any:
        names = labels.get(name)
        if names and isinstance(value, int | str) and value in names:
            return names[value]
        return value

    return [
        {
            "field": name,
            "before": named(name, before.get(name)),
            "after": named(name, after[name]),
        }
        for name in sorted(after)
    ]
