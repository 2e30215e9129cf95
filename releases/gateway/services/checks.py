"""Is the gateway doing it? Read the running LiteLLM proxy and record how it compares
with the config the ledger renders now.

- `read_model_info` asks the proxy at GATEWAY_URL for ``GET /model/info`` with
  GATEWAY_API_KEY, through replay's outbound guard (`replay.outbound.guarded_client`:
  REPLAY_ALLOWED_HOSTS at every connection, no redirects, no proxies). A refused or
  failed connection, a timeout, an answer other than 200 or one that is not the JSON
  LiteLLM answers is `GatewayUnreadable`: the check is *unknown*, never "in sync".
- `record_check` compares (`releases.gateway.drift.compare`) and writes, under a
  singleton lock: one `GatewayCheck` row per live service (in sync, drifted with its
  differences, unknown with the reason); a difference that lasted
  GATEWAY_DRIFT_GRACE_SECONDS (the deployer's time to apply a new config) opens an
  `UnauthorizedChange` of kind gateway, one open per service (a second check adds
  nothing while it is open); and an Event when the gateway-wide outcome changes (its
  state, or which services drifted). The finding is closed as every unauthorized change
  is: a release or a rollback of the service, or a note (`releases.governance.services.drift`).
- `check_gateway` is both, for the beat task and the "Check the gateway now" button.

The reads do not grow with the services: `gateway()`'s four, the live services, the
rows, and the open findings when something drifted; the writes are one UPDATE for every
row that did not change and one statement each for those that did.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from ledger.chain import NewEvent, append_events
from ledger.models import Service
from lib.actors import Actor
from releases.gateway.drift import Difference, compare, not_routed
from releases.gateway.litellm import render_config
from releases.gateway.queries import gateway
from releases.models import GatewayCheck, UnauthorizedChange
from replay.outbound import DestinationPolicy, guarded_client
from replay.services.common import try_singleton_lock

MODEL_INFO_PATH = "/model/info"
METRICS_PATH = "/metrics/"
# The Events of a gateway-wide outcome that changed, by the state it changed to.
ACTIONS: dict[str, str] = {
    "in_sync": "gateway.check_in_sync",
    "drifted": "gateway.check_drifted",
    "unknown": "gateway.check_unknown",
}
LOCK = "check_gateway"


class GatewayUnreadable(Exception):
    """The gateway could not be read; the message says why (no key in it)."""


def policy() -> DestinationPolicy:
    """Where the check may connect: the gateway sits beside the backends replay reaches."""
    return DestinationPolicy(
        settings.REPLAY_ALLOWED_HOSTS, setting="REPLAY_ALLOWED_HOSTS", purpose="the gateway check"
    )


class _TooLarge(Exception):
    pass


async def _get(url: str, key: str, timeout: float, limit: int) -> tuple[int, bytes]:
    """The status and, for a 200, the body: read in parts, never more than `limit` bytes."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with (
        guarded_client(timeout=httpx.Timeout(timeout), policy=policy()) as client,
        client.stream("GET", url, headers=headers) as response,
    ):
        if response.status_code != 200:
            return response.status_code, b""
        body = bytearray()
        async for part in response.aiter_bytes():
            body += part
            if len(body) > limit:
                raise _TooLarge
        return 200, bytes(body)


def _read(base_url: str, path: str, key: str, timeout: float) -> tuple[str, bytes]:
    """(the URL, its body): a 200 within GATEWAY_MAX_RESPONSE_MB through the guard, else
    GatewayUnreadable saying what went wrong."""
    url = base_url.rstrip("/") + path
    limit_mb = settings.GATEWAY_MAX_RESPONSE_MB
    try:
        status, content = asyncio.run(_get(url, key, timeout, limit_mb * 1024 * 1024))
    except httpx.HTTPError as error:
        raise GatewayUnreadable(f"{url}: {type(error).__name__}: {error}"[:500]) from error
    except _TooLarge as error:
        raise GatewayUnreadable(
            f"{url} answered more than {limit_mb} MB (GATEWAY_MAX_RESPONSE_MB); not read"
        ) from error
    if status != 200:
        raise GatewayUnreadable(f"{url} answered HTTP {status}")
    return url, content


def read_model_info(base_url: str, key: str, *, timeout: float) -> list[dict[str, Any]]:
    """The ``data`` of the proxy's ``/model/info``: one entry per deployment it routes."""
    url, content = _read(base_url, MODEL_INFO_PATH, key, timeout)
    try:
        data = orjson.loads(content)["data"]
    except (orjson.JSONDecodeError, KeyError, TypeError) as error:
        raise GatewayUnreadable(f"{url} did not answer the JSON of /model/info") from error
    if not isinstance(data, list) or not all(isinstance(entry, dict) for entry in data):
        raise GatewayUnreadable(f"{url} did not answer a list of deployments")
    return data


def read_metrics_text(base_url: str, key: str, *, timeout: float) -> str:
    """The proxy's ``/metrics/`` (its Prometheus callback), as text, through the same guard
    and size limit as ``/model/info``. ``/metrics`` redirects there, and the guarded
    client follows no redirect."""
    url, content = _read(base_url, METRICS_PATH, key, timeout)
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError as error:
        raise GatewayUnreadable(f"{url}: the answer is not UTF-8 text ({error.reason})") from error


@dataclass
class CheckOutcome:
    """What one check found, gateway-wide."""

    state: str
    checked_at: dt.datetime
    services: int
    drifted: list[str] = field(default_factory=list)
    # The unauthorized changes this check opened.
    opened: list[UnauthorizedChange] = field(default_factory=list)
    reason: str = ""
    # Model names the gateway serves that the ledger does not route: not compared.
    not_routed: list[str] = field(default_factory=list)


def check_gateway(*, actor: Actor = None, now: dt.datetime | None = None) -> CheckOutcome | None:
    """Read the gateway at GATEWAY_URL and record the comparison (None: no GATEWAY_URL,
    or another check holds the lock)."""
    if not settings.GATEWAY_URL:
        return None
    try:
        running: list[dict[str, Any]] | None = read_model_info(
            settings.GATEWAY_URL,
            settings.GATEWAY_API_KEY,
            timeout=settings.GATEWAY_TIMEOUT_SECONDS,
        )
        reason = ""
    except GatewayUnreadable as error:
        running, reason = None, str(error)
    return record_check(running, reason=reason, actor=actor, now=now)


def _state(found: list[Difference] | None) -> str:
    if found is None:
        return GatewayCheck.State.UNKNOWN
    return GatewayCheck.State.DRIFTED if found else GatewayCheck.State.IN_SYNC


def _overall(states: Mapping[str, str]) -> tuple[str, list[str]]:
    drifted = sorted(slug for slug, state in states.items() if state == GatewayCheck.State.DRIFTED)
    if any(state == GatewayCheck.State.UNKNOWN for state in states.values()):
        return GatewayCheck.State.UNKNOWN, []
    return (GatewayCheck.State.DRIFTED if drifted else GatewayCheck.State.IN_SYNC), drifted


@transaction.atomic
def record_check(
    running: list[dict[str, Any]] | None,
    *,
    reason: str = "",
    actor: Actor = None,
    now: dt.datetime | None = None,
) -> CheckOutcome | None:
    """Compare ``running`` (``/model/info``'s data; None: unreadable, ``reason`` says
    why) with the config the ledger renders now, and record it. None when another check
    holds the lock."""
    if running is None and not reason:
        raise ValueError("an unreadable gateway needs a reason")
    if not try_singleton_lock(LOCK):
        return None
    now = now or timezone.now()
    live = {
        slug: (pk, revision)
        for pk, slug, revision in Service.objects.filter(live_revision__isnull=False).values_list(
            "pk", "slug", "live_revision_id"
        )
    }
    if running is None:
        found: dict[str, list[Difference] | None] = dict.fromkeys(live)
        ignored: list[str] = []
    else:
        routes = gateway()
        found = dict(compare(render_config(routes.routes), running, live))
        ignored = not_routed(running, live)
    rows = {row.service_id: row for row in GatewayCheck.objects.all()}
    previous = {slug: rows[pk].state for slug, (pk, _revision) in live.items() if pk in rows}
    unchanged, changed, created = [], [], []
    row_reason = reason if running is None else ""
    for slug, differences in found.items():
        pk = live[slug][0]
        state, listed = _state(differences), list(differences or [])
        row = rows.get(pk)
        if row is None:
            created.append(
                GatewayCheck(
                    service_id=pk,
                    state=state,
                    since=now,
                    checked_at=now,
                    found=listed,
                    reason=row_reason,
                )
            )
        elif row.state == state and row.found == listed:
            unchanged.append(row.pk)
            row.checked_at = now
        else:
            row.state, row.since, row.checked_at, row.found = state, now, now, listed
            row.reason = row_reason
            changed.append(row)
    if unchanged:
        # Still unknown: the newest reason (refused, then timed out) is the one shown.
        also = {"reason": reason} if running is None else {}
        GatewayCheck.objects.filter(pk__in=unchanged).update(checked_at=now, **also)
    # A row that changed to in sync or unknown reads as every other one of that state: one
    # UPDATE for each (a bulk_update of 2,000 rows in CASE WHENs took seconds); only the
    # drifted ones differ row by row.
    for state in (GatewayCheck.State.IN_SYNC, GatewayCheck.State.UNKNOWN):
        same = [row.pk for row in changed if row.state == state]
        if same:
            GatewayCheck.objects.filter(pk__in=same).update(
                state=state, since=now, checked_at=now, found=[], reason=row_reason
            )
    drifted_rows = [row for row in changed if row.state == GatewayCheck.State.DRIFTED]
    if drifted_rows:
        GatewayCheck.objects.bulk_update(
            drifted_rows, ["state", "since", "checked_at", "found", "reason"]
        )
    if created:
        GatewayCheck.objects.bulk_create(created)
    # Services no longer live: nothing is compared for them any more.
    live_pks = [pk for pk, _revision in live.values()]
    GatewayCheck.objects.exclude(service_id__in=live_pks).delete()

    states = {slug: _state(differences) for slug, differences in found.items()}
    state, drifted = _overall(states)
    opened = _open_findings(found, live, rows | {row.service_id: row for row in created}, now=now)
    entries = [
        NewEvent(
            "service.unauthorized_change",
            change,
            {
                "kind": change.kind,
                "expected": {"revision": change.expected_revision_id},
                "found": change.found,
                "detected_at": change.detected_at,
            },
            subject_label=f"{slug}: gateway",
            service_id=change.service_id,
        )
        for slug, change in opened
    ]
    before, before_drifted = _overall(previous) if previous else (None, [])
    if (state, drifted) != (before, before_drifted):
        entries.append(
            NewEvent(
                ACTIONS[state],
                ("gateway", "litellm"),
                {
                    "gateway": settings.GATEWAY_URL,
                    "state": state,
                    "services": len(live),
                    "drifted": drifted,
                    "newly_drifted": sorted(set(drifted) - set(before_drifted)),
                    "back_in_sync": sorted(
                        slug
                        for slug in before_drifted
                        if states.get(slug) == GatewayCheck.State.IN_SYNC
                    ),
                    "reason": reason,
                    "not_routed": len(ignored),
                },
                subject_label="LLM gateway",
            )
        )
    append_events(entries, actor=actor)
    return CheckOutcome(
        state=state,
        checked_at=now,
        services=len(live),
        drifted=drifted,
        opened=[change for _slug, change in opened],
        reason=reason,
        not_routed=ignored,
    )


def _open_findings(
    found: Mapping[str, list[Difference] | None],
    live: Mapping[str, tuple[int, int]],
    rows: Mapping[int, GatewayCheck],
    *,
    now: dt.datetime,
) -> list[tuple[str, UnauthorizedChange]]:
    """A finding for each service whose differences lasted the grace, unless one is open."""
    grace = dt.timedelta(seconds=settings.GATEWAY_DRIFT_GRACE_SECONDS)
    due = [
        slug
        for slug, differences in found.items()
        if differences and now - rows[live[slug][0]].since >= grace
    ]
    if not due:
        return []
    already = set(
        UnauthorizedChange.objects.filter(
            kind=UnauthorizedChange.Kind.GATEWAY,
            reconciled_at__isnull=True,
            service_id__in=[live[slug][0] for slug in due],
        ).values_list("service_id", flat=True)
    )
    new = [
        (
            slug,
            UnauthorizedChange(
                service_id=live[slug][0],
                kind=UnauthorizedChange.Kind.GATEWAY,
                expected_revision_id=live[slug][1],
                found=found[slug],
                detected_at=rows[live[slug][0]].since,
            ),
        )
        for slug in due
        if live[slug][0] not in already
    ]
    UnauthorizedChange.objects.bulk_create([change for _slug, change in new])
    return new
