"""A service's day recorded from two scrapes of the gateway's ``/metrics``.

The gateway's metrics are what the gateway saw at the edge, so the day is recorded from
source ``gateway``, as the gateway's own push is: the same observer, read another way
(its Prometheus counters instead of a JSON body). A deployment uses one or the other;
if both arrive for one day, the later replaces the earlier and the Event says
``replaced`` with what it replaced. ``details["from"]`` says which it was
(``gateway_metrics``), and ``details["window"]`` which scrapes.

The rows go through ``ledger.services.record_run_summary`` with ``breakdown``: the same
checks (tenants and task types the service's own or ``unattributed``), the totals the
rows' sums, the idempotent replace, one Event.

`scrape_gateway` (the daily beat task) keeps one scrape of the gateway at GATEWAY_URL
(`GatewayMetricsScrape`): the first of the current day (UTC). The first scrape of the
next day closes that window: every service the gateway has counted a request of gets
its day from the two, and the new scrape opens the next day. A scrape later the same
day changes nothing; a stored scrape more than a day old records nothing (its counts
would belong to several days). A service whose day is refused is named in the outcome
and the others are recorded all the same. A service the gateway never counted gets no
day from it: its day may come from elsewhere (a push), and 0 would replace it.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from ledger.metrics_import import ExpositionError, Scrape, parse_exposition
from ledger.models import Revision, RunSummary, Service
from ledger.services import record_run_summary
from ledger.services.run_evidence import Outcome
from lib.actors import Actor
from releases.gateway.metrics import GatewayDay, by_service, read_gateway_day
from releases.gateway.queries import service_names
from releases.gateway.services.checks import GatewayUnreadable, read_metrics_text
from releases.models import GatewayMetricsScrape
from replay.services.common import try_singleton_lock

logger = logging.getLogger(__name__)
LOCK = "scrape_gateway_metrics"


def read_day(
    service: Service, *, before: Scrape, after: Scrape, window: Mapping[str, Any] | None = None
) -> GatewayDay:
    """The day as it would be recorded (for a dry run, and for `record_gateway_day`)."""
    day = read_gateway_day(before, after, service_names(service))
    day.details["window"] = dict(window or {"before": before.source, "after": after.source})
    return day


def record_gateway_day(
    service: Service,
    *,
    actor: Actor,
    date: dt.date,
    before: Scrape,
    after: Scrape,
    revision: Revision | None = None,
    window: Mapping[str, Any] | None = None,
) -> tuple[RunSummary, Outcome]:
    """Record `service`'s day, by tenant, task type and backend, from two scrapes of the
    gateway's metrics. ValidationError and PermissionDenied as `record_run_summary`'s."""
    day = read_day(service, before=before, after=after, window=window)
    return record_run_summary(
        service,
        actor=actor,
        date=date,
        source=RunSummary.Source.GATEWAY,
        revision=revision,
        **day.fields,
    )


@dataclass
class GatewayScrapeOutcome:
    status: str  # opened | kept | recorded | gap | failed
    date: dt.date | None = None
    # Each service's outcome ("recorded", "replaced", "unchanged"), by slug.
    recorded: dict[str, str] = field(default_factory=dict)
    # Each refused service's reasons, by slug.
    refused: dict[str, str] = field(default_factory=dict)
    detail: str = ""

    def to_json(self) -> dict[str, object]:
        return {
            "status": self.status,
            "date": self.date.isoformat() if self.date else None,
            "recorded": self.recorded,
            "refused": self.refused,
            "detail": self.detail,
        }


def _reasons(error: ValidationError) -> str:
    if hasattr(error, "error_dict"):
        return "; ".join(f"{name}: {' '.join(m)}" for name, m in error.message_dict.items())
    return "; ".join(error.messages)


def _record_services(
    before: Scrape, after: Scrape, *, date: dt.date, window: Mapping[str, Any]
) -> GatewayScrapeOutcome:
    outcome = GatewayScrapeOutcome("recorded", date)
    earlier, later = by_service(before), by_service(after)
    for service in Service.objects.filter(slug__in=list(later)).order_by("slug"):
        try:
            with transaction.atomic():  # a refused day leaves the others recorded
                _, recorded = record_gateway_day(
                    service,
                    actor=None,
                    date=date,
                    before=earlier.get(service.slug, Scrape(before.source)),
                    after=later[service.slug],
                    window=window,
                )
        except ValidationError as error:
            outcome.refused[service.slug] = _reasons(error)
            logger.warning("gateway day of %s refused: %s", service.slug, _reasons(error))
            continue
        outcome.recorded[service.slug] = recorded
    return outcome


def scrape_gateway(*, now: dt.datetime | None = None) -> GatewayScrapeOutcome | None:
    """Scrape the gateway now; record the day its stored scrape opened when this one
    closes it. None: no GATEWAY_URL, its metrics are off, or another scrape is running."""
    url = settings.GATEWAY_URL
    if not url or not settings.GATEWAY_PROMETHEUS_METRICS:
        return None
    now = now or timezone.now()
    try:
        text = read_metrics_text(
            url, settings.GATEWAY_API_KEY, timeout=settings.GATEWAY_TIMEOUT_SECONDS
        )
        after = parse_exposition(
            text, source=f"{url} /metrics at {now.astimezone(dt.UTC):%Y-%m-%dT%H:%M:%SZ}"
        )
    except (GatewayUnreadable, ExpositionError) as error:
        logger.warning("gateway metrics scrape failed: %s", error)
        return GatewayScrapeOutcome("failed", detail=str(error))

    today = now.astimezone(dt.UTC).date()
    with transaction.atomic():
        if not try_singleton_lock(LOCK):
            return None
        previous = GatewayMetricsScrape.objects.select_for_update().filter(url=url).first()
        opened = previous.taken_at.astimezone(dt.UTC).date() if previous else None
        if previous is not None and opened is not None and opened >= today:
            return GatewayScrapeOutcome("kept", opened, detail="the day's window is open")
        outcome = GatewayScrapeOutcome("opened", today)
        if previous is not None and opened is not None:
            if today - opened > dt.timedelta(days=1):
                outcome = GatewayScrapeOutcome(
                    "gap",
                    opened,
                    detail=f"the stored scrape is from {opened}: its window spans several days",
                )
            else:
                before = parse_exposition(previous.text, source=f"{url} stored scrape")
                outcome = _record_services(
                    before,
                    after,
                    date=opened,
                    window={
                        "gateway": url,
                        "start": previous.taken_at.astimezone(dt.UTC).isoformat(),
                        "end": now.astimezone(dt.UTC).isoformat(),
                    },
                )
        GatewayMetricsScrape.objects.update_or_create(
            url=url, defaults={"taken_at": now, "text": text}
        )
    return outcome
