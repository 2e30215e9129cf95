"""What was serving, and since when: a service's live revision over time, read from the
event chain rather than from the mutable `Service.live_revision` column, so the answer
agrees with `verify_ledger` and survives any later edit of the service row.

Each `service.live_revision_changed` event opens an interval that the next one closes.
Its payload says which revision, why (`reason`), what set it (`cause`: e.g.
``{"release": 12}`` or ``{"rollback": 3}``, filled in by the releases app) and, since
the event carried it, the revision's fingerprint at that moment.

Beside the live revision, another may carry a share of the traffic (a gray rollout's
candidate). The ledger knows only the shape of such a share; the app that records
them registers a reader (`register_share_reader`, as `ledger.locks.register`), and
`shares_at` / `share_history` ask every reader.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ledger.models import Event, Revision, Service

LIVE_CHANGED = "service.live_revision_changed"


@dataclass(frozen=True)
class ServingInterval:
    revision: Revision | None  # None: the event names a revision that no longer exists
    revision_id: int | None
    since: dt.datetime
    until: dt.datetime | None  # None: still serving
    fingerprint: str
    actor: str
    reason: str
    cause: dict[str, Any]
    event_sequence: int
    event_hash: str

    @property
    def note(self) -> str:
        """The reason as a page shows it beside "through rollback #3": without the
        "rollback #3: " the rollback put in front of it (the recorded reason keeps it)."""
        rollback = self.cause.get("rollback")
        prefix = f"rollback #{rollback}: "
        if isinstance(rollback, int) and self.reason.startswith(prefix):
            return self.reason.removeprefix(prefix)
        return self.reason


def _live_changes(service: Service) -> Any:
    return Event.objects.filter(service=service, action=LIVE_CHANGED)


def _interval(event: Event, until: Event | None, revisions: dict[int, Revision]) -> ServingInterval:
    data = event.payload_data
    after = data.get("after") or {}
    revision_id = after.get("live_revision")
    revision = revisions.get(revision_id) if isinstance(revision_id, int) else None
    fingerprint = data.get("fingerprint") or (revision.fingerprint if revision else "")
    cause = data.get("cause")
    return ServingInterval(
        revision=revision,
        revision_id=revision_id if isinstance(revision_id, int) else None,
        since=event.created_at,
        until=until.created_at if until is not None else None,
        fingerprint=fingerprint,
        actor=event.actor_label,
        reason=str(data.get("reason") or ""),
        cause=cause if isinstance(cause, dict) else {},
        event_sequence=event.sequence,
        event_hash=event.hash,
    )


def _revisions(events: list[Event]) -> dict[int, Revision]:
    ids = {(e.payload_data.get("after") or {}).get("live_revision") for e in events} - {None}
    found = Revision.objects.filter(pk__in=[i for i in ids if isinstance(i, int)]).select_related(
        "model_asset", "runtime"
    )
    return {revision.pk: revision for revision in found}


def serving_history(
    service: Service, *, limit: int | None = None, with_revisions: bool = True
) -> list[ServingInterval]:
    """The intervals of live revision, newest first (two queries; one without the
    revisions themselves, whose ids and fingerprints the events carry)."""
    changes = _live_changes(service).order_by("-sequence")
    events = list(changes[: limit + 1] if limit is not None else changes)
    revisions = _revisions(events) if with_revisions else {}
    intervals = [
        _interval(event, events[n - 1] if n > 0 else None, revisions)
        for n, event in enumerate(events)
    ]
    return intervals[:limit] if limit is not None else intervals


def serving_at(service: Service, at: dt.datetime) -> ServingInterval | None:
    """The interval that contains `at`, or None when nothing was live yet (three queries)."""
    opened = _live_changes(service).filter(created_at__lte=at).order_by("-sequence").first()
    if opened is None:
        return None
    closed = (
        _live_changes(service).filter(sequence__gt=opened.sequence).order_by("sequence").first()
    )
    return _interval(opened, closed, _revisions([opened]))


@dataclass(frozen=True)
class ServingShare:
    """A revision carrying part of the traffic beside the live one, from `since` to `until`."""

    revision_id: int
    revision_number: int
    revision_label: str
    traffic_pct: float
    since: dt.datetime
    until: dt.datetime | None  # None: still carrying it
    cause: dict[str, Any]  # e.g. {"release": 12, "stage": 2}
    event_sequence: int


ShareReader = Callable[[Service, dt.datetime | None, int | None], list[ServingShare]]
_share_readers: list[ShareReader] = []


def register_share_reader(reader: ShareReader) -> ShareReader:
    """`reader(service, at, limit)`: the shares in force at `at` (with `at`), or the
    newest `limit` shares over time (without)."""
    if reader not in _share_readers:
        _share_readers.append(reader)
    return reader


def shares_at(service: Service, at: dt.datetime) -> list[ServingShare]:
    return [share for reader in _share_readers for share in reader(service, at, None)]


def share_history(service: Service, *, limit: int = 50) -> list[ServingShare]:
    """Shares over time, newest first."""
    found = [share for reader in _share_readers for share in reader(service, None, limit)]
    return sorted(found, key=lambda share: share.event_sequence, reverse=True)[:limit]
