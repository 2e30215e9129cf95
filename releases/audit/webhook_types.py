"""The event types a webhook subscription may ask for, and the ledger actions behind each.

One table: a friendly name a receiver sees (the payload's `type`) → the ledger
actions (`Event.action`) that are delivered under it, and whether anything
appends them yet.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EventType:
    label: str
    actions: tuple[str, ...]
    emitted: bool = True  # False: nothing appends these actions yet


EVENT_TYPES: dict[str, EventType] = {
    "release.submitted": EventType("Release submitted for sign-off", ("release.submitted",)),
    "release.approved": EventType("Release approved", ("release.approved",)),
    "release.rejected": EventType("Release rejected", ("release.rejected",)),
    "export.ready": EventType("Audit export ready to download", ("export.ready",)),
    "stage.breached": EventType("Rollout stage breached a guard", ("release.stage_breached",)),
    "rollback.recorded": EventType("Rollback recorded", ("rollback.recorded",)),
    "review.raised": EventType("Review raised", ("review.raised",)),
    "review.overdue": EventType("Review overdue", ("review.overdue",)),
    "gateway.config_changed": EventType(
        "Gateway config changed (deploy it)", ("gateway.config_changed",)
    ),
}

CHOICES = [(key, kind.label) for key, kind in EVENT_TYPES.items()]


def actions_for(types: list[str]) -> dict[str, str]:
    """Ledger action → the friendly type it is delivered as, for the types given."""
    return {
        action: key for key in types if key in EVENT_TYPES for action in EVENT_TYPES[key].actions
    }
