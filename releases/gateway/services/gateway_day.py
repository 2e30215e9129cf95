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
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from ledger.metrics_import import Scrape
from ledger.models import Revision, RunSummary, Service
from ledger.services import record_run_summary
from ledger.services.run_evidence import Outcome
from lib.actors import Actor
from releases.gateway.metrics import GatewayDay, read_gateway_day
from releases.gateway.queries import service_names


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
