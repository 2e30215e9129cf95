"""A gray rollout's candidate as a share of what served, read from the event chain:
each `release.stage_started` below 100 % opens a share at its traffic percentage; the
release's next rollout event (promoted, released, aborted, rolled back) closes it.

Registered with `ledger.queries.register_share_reader`, so "what was serving at T"
(page and API) names the candidate and its share beside the live revision.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from ledger.models import Event, Service
from ledger.queries import ServingShare
from releases.models import Release

OPENS = "release.stage_started"
ROLLOUT_ACTIONS = (
    OPENS,
    "release.promoted",
    "release.released",
    "release.aborted",
    "release.rolled_back",
)


def _rollout_events(service: Service) -> Any:
    return Event.objects.filter(service=service, action__in=ROLLOUT_ACTIONS).only(
        "sequence", "created_at", "action", "subject_id", "payload"
    )


def _share_pct(event: Event) -> float | None:
    pct = event.payload_data.get("traffic_pct")
    if event.action != OPENS or not isinstance(pct, int | float) or not 0 < pct < 100:
        return None
    return float(pct)


def _candidates(events: list[Event]) -> dict[str, Release]:
    ids = {event.subject_id for event in events if _share_pct(event) is not None}
    found = Release.objects.filter(pk__in=[int(i) for i in ids if str(i).isdigit()])
    return {str(r.pk): r for r in found.select_related("to_revision").only("to_revision")}


def _share(opened: Event, closed: Event | None, release: Release) -> ServingShare:
    return ServingShare(
        revision_id=release.to_revision_id,
        revision_number=release.to_revision.number,
        revision_label=release.to_revision.label,
        traffic_pct=_share_pct(opened) or 0.0,
        since=opened.created_at,
        until=closed.created_at if closed is not None else None,
        cause={"release": release.pk, "stage": opened.payload_data.get("stage")},
        event_sequence=opened.sequence,
    )


def _shares_over(events: list[Event]) -> list[ServingShare]:
    """Events oldest first → the shares they open, each closed by its release's next event."""
    releases = _candidates(events)
    shares = []
    for n, event in enumerate(events):
        release = releases.get(event.subject_id)
        if release is None or _share_pct(event) is None:
            continue
        closed = next((e for e in events[n + 1 :] if e.subject_id == event.subject_id), None)
        shares.append(_share(event, closed, release))
    return shares


def rollout_shares(
    service: Service, at: dt.datetime | None, limit: int | None
) -> list[ServingShare]:
    """At `at`: the candidate's share then, if a rollout was in flight (three queries at
    most). Without: the newest `limit` shares, newest first (two queries)."""
    if at is None:
        newest = list(_rollout_events(service).order_by("-sequence")[: (limit or 50) * 3])
        return list(reversed(_shares_over(list(reversed(newest)))))[: limit or 50]
    last = _rollout_events(service).filter(created_at__lte=at).order_by("-sequence").first()
    if last is None or _share_pct(last) is None:
        return []
    closed = (
        _rollout_events(service)
        .filter(sequence__gt=last.sequence, subject_id=last.subject_id)
        .order_by("sequence")
        .first()
    )
    return _shares_over([last] + ([closed] if closed else []))[:1]
