"""The rendered gateway config recorded after each change of routing, and announced.

A verb that changes what the gateway should route (a rollout starting, a promotion,
an abort, a rollback, a release reaching 100 %, a live revision set, a backend added,
routed or taken out of the gateway) appends its Event before its transaction ends, often before the
rest of the change is written (a promotion records `release.promoted`, then starts the
next stage), and the chain is append-only: the config's sha256 cannot be written into
that Event once the change is complete. So:

- `queue_config_record` listens to `ledger.chain.events_appended`; for the Events of
  `ROUTING_ACTIONS` it queues `record_gateway_config` on commit, naming each service
  and the Event that changed it.
- `record_config_changes` (that task, after the commit) renders each service's config
  as `GET /api/services/{slug}/gateway/litellm/` does and compares its sha256 with the
  one the service's last `gateway.config_changed` Event recorded. When it differs, it
  appends a `gateway.config_changed` Event (the service, the new and the previous
  sha256, the cause Event's action, id and sequence, the config's URL), which the
  webhook dispatcher delivers as the `gateway.config_changed` type. When it is the
  same (a hold, a breach, an observation), nothing is appended.

Recorders take one lock in turn (a PostgreSQL advisory lock), so two of them for one
service (two changes committed close together) record its config once. Not the
services' rows: a verb that has appended an Event holds the chain's lock and may then
lock its service, while a recorder holding that row would wait for the chain: a deadlock.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.urls import reverse

from ledger.chain import NewEvent, append_events
from ledger.models import Event, Service
from lib.tasks import send_on_commit
from releases.gateway.queries import CONFIG_CHANGED, config_sha256s, recorded_sha256s

logger = logging.getLogger(__name__)

# The Event actions after which a service's rendered config may differ. A hold and a
# breach keep the share (listed so a change there would still be seen: none is).
ROUTING_ACTIONS: frozenset[str] = frozenset(
    {
        "service.live_revision_changed",
        "revision.updated",  # a revision's gateway policy (a candidate's, before it serves)
        "replay.backend_created",
        "replay.backend_updated",  # routed or not, moved, pointed at another revision
        "release.rollout_started",
        "release.stage_started",
        "release.promoted",
        "release.stage_held",
        "release.stage_breached",
        "release.aborted",
        "release.released",
        "release.rolled_back",
        "rollback.recorded",
        "rollback.finished",
    }
)


def queue_config_record(sender: Any, events: list[Event], **kwargs: Any) -> None:
    """`events_appended` receiver: queue the record of the services these Events may
    have re-routed, once the transaction commits (nothing if it rolls back)."""
    causes = [
        [event.service_id, event.pk]
        for event in events
        if event.action in ROUTING_ACTIONS and event.service_id is not None
    ]
    if causes:
        send_on_commit("record_gateway_config", causes)


_RECORDER_LOCK = zlib.crc32(b"releases:record_gateway_config")


def _recorders_in_turn() -> None:
    """Wait for any other recorder to commit (SQLite admits one writer at a time anyway)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_RECORDER_LOCK])


def config_url(slug: str) -> str:
    return settings.LEDGER_BASE_URL + reverse("api:service_gateway_litellm", args=[slug])


@transaction.atomic
def record_config_changes(causes: Iterable[tuple[int, int]]) -> list[Event]:
    """Record the config of each service named in `causes` ((service id, Event id), the
    Event that may have changed it) whose sha256 differs from the one last recorded."""
    first_cause: dict[int, int] = {}
    for service_id, event_id in causes:
        first_cause.setdefault(service_id, event_id)
    _recorders_in_turn()
    services = list(Service.objects.filter(pk__in=first_cause).order_by("pk"))
    now = config_sha256s(service.slug for service in services)
    before = recorded_sha256s(service.pk for service in services)
    cause_events = Event.objects.in_bulk(list(first_cause.values()))
    entries = []
    for service in services:
        sha256, previous = now[service.slug], before.get(service.pk)
        if sha256 == previous:
            continue
        cause = cause_events.get(first_cause[service.pk])
        entries.append(
            NewEvent(
                action=CONFIG_CHANGED,
                subject=service,
                payload={
                    "service": service.slug,
                    "sha256": sha256,
                    "previous_sha256": previous,
                    "cause": {
                        "action": cause.action if cause else None,
                        "event": cause.pk if cause else None,
                        "sequence": cause.sequence if cause else None,
                    },
                    "url": config_url(service.slug),
                },
            )
        )
    recorded = append_events(entries, actor=None)
    for event in recorded:
        logger.info("gateway config of %s changed: %s", event.subject_label, event.payload_data)
    return recorded
