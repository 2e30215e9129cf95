"""The FOCUS CSV written by PostgreSQL: `COPY (SELECT …) TO STDOUT WITH (FORMAT csv,
HEADER)` over the stored cost (`releases.models.CostShare`), streamed through psycopg's
`copy()`: the same bytes as `focus.focus_lines` writes in Python (a test compares the
two), in about the time COPY itself takes.

How the SELECT keeps the bytes the same:

- An empty cell is NULL, never `''`: COPY writes an empty string quoted (`""`), the
  csv module writes nothing. Text that may be empty goes through `NULLIF(…, '')`.
- Amounts are numeric columns of the scale Python's `str(Decimal)` writes (cents, six
  decimals of GPU-hours, the price sheet's four), so their text is the same.
- Days are `date::text` under `DateStyle ISO`, set for the transaction only.
- The ChargeDescription and the Tags JSON are the stored row's own text, built by the
  Python writer's functions when the cost was recorded; tenant and team names are made
  spreadsheet-safe as `ledger.exports.events` does it.
- Rows come in the Python writer's order: service id, day, part.

PostgreSQL only; elsewhere `focus.focus_lines` writes the file.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator
from typing import Any

import psycopg
from django.conf import settings
from django.db import connection, transaction

from ledger.exports.events import _neutralised
from releases.cost.focus import (
    COLUMNS,
    GPU_HOURS,
    RESOURCE_TYPE,
    SERVICE_CATEGORY,
    FocusStats,
    focus_lines,
)

_MONTH = "date_trunc('month', c.date::timestamp)"
_TEAM = f"NULLIF({_neutralised('t.name')}, '')"
# One expression per column of `focus.COLUMNS`, in its order. Constant SQL: the period,
# services and settings are bound parameters.
_CELLS = {
    "AvailabilityZone": "NULL",
    "BilledCost": "c.cost",
    "BillingAccountId": "%(account)s",
    "BillingAccountName": "%(account)s",
    "BillingCurrency": "NULLIF(c.currency, '')",
    "BillingPeriodEnd": f"({_MONTH} + interval '1 month')::date::text || 'T00:00:00Z'",
    "BillingPeriodStart": f"{_MONTH}::date::text || 'T00:00:00Z'",
    "ChargeCategory": "'Usage'",
    "ChargeClass": "NULL",
    "ChargeDescription": "NULLIF(c.description, '')",
    "ChargeFrequency": "'Usage-Based'",
    "ChargePeriodEnd": "(c.date + 1)::text || 'T00:00:00Z'",
    "ChargePeriodStart": "c.date::text || 'T00:00:00Z'",
    "CommitmentDiscountCategory": "NULL",
    "CommitmentDiscountId": "NULL",
    "CommitmentDiscountName": "NULL",
    "CommitmentDiscountStatus": "NULL",
    "CommitmentDiscountType": "NULL",
    "ConsumedQuantity": "c.gpu_hours",
    "ConsumedUnit": f"'{GPU_HOURS}'",
    "ContractedCost": "c.cost",
    "ContractedUnitPrice": "c.price_per_gpu_hour",
    "EffectiveCost": "c.cost",
    "InvoiceIssuer": "%(provider)s",
    "ListCost": "c.cost",
    "ListUnitPrice": "c.price_per_gpu_hour",
    "PricingCategory": "'Standard'",
    "PricingQuantity": "c.gpu_hours",
    "PricingUnit": f"'{GPU_HOURS}'",
    "Provider": "%(provider)s",
    "Publisher": "%(provider)s",
    "RegionId": "NULL",
    "RegionName": "NULL",
    "ResourceId": "NULLIF(c.fingerprint, '')",
    "ResourceName": "CASE WHEN c.revision_label = '' THEN s.slug "
    "ELSE s.slug || ' ' || c.revision_label END",
    "ResourceType": f"'{RESOURCE_TYPE}'",
    "ServiceCategory": f"'{SERVICE_CATEGORY}'",
    "ServiceName": "s.slug",
    "SkuId": "NULLIF(c.gpu_model, '')",
    "SkuPriceId": "CASE WHEN c.price_since IS NULL THEN NULL "
    "ELSE c.gpu_model || '@' || c.price_since::text END",
    "SubAccountId": _TEAM,
    "SubAccountName": _TEAM,
    "Tags": "NULLIF(c.tags, '')",
    "x_Tenant": f"NULLIF({_neutralised('c.tenant')}, '')",
    "x_TaskType": "NULLIF(c.task_type, '')",
    "x_Release": "NULLIF(c.release, '')",
    "x_Revision": "NULLIF(c.revision_label, '')",
    "x_InputTokens": "c.input_tokens",
    "x_OutputTokens": "c.output_tokens",
    "x_Requests": "c.requests",
    "x_AcceptedAnswers": "c.accepted_answers",
}
assert tuple(_CELLS) == COLUMNS
_SELECT = (
    "SELECT "  # noqa: S608 - constant SQL
    + ", ".join(f'{expression} AS "{column}"' for column, expression in _CELLS.items())
    + " FROM releases_costshare c"
    " JOIN ledger_service s ON s.id = c.service_id"
    " LEFT JOIN ledger_team t ON t.id = s.team_id"
    " WHERE c.priced AND c.date >= %(since)s AND c.date <= %(until)s"
)
_ORDER = " ORDER BY c.service_id, c.date, c.position"
_COUNTS = (
    "SELECT count(*) FILTER (WHERE c.priced), count(*) FILTER (WHERE c.position = 0), "
    "count(*) FILTER (WHERE NOT c.priced) FROM releases_costshare c"
    " WHERE c.date >= %(since)s AND c.date <= %(until)s"
)
_SOME_SERVICES = " AND s.slug = ANY(%(services)s)"
_SOME_SERVICES_COUNTED = (
    " AND c.service_id IN (SELECT s.id FROM ledger_service s WHERE s.slug = ANY(%(services)s))"
)


def _params(since: dt.date, until: dt.date, services: list[str] | None) -> dict[str, Any]:
    return {
        "since": since,
        "until": until,
        "services": services,
        "account": settings.COST_BILLING_ACCOUNT_ID,
        "provider": settings.COST_PROVIDER_NAME,
    }


def copy_focus(
    since: dt.date,
    until: dt.date,
    services: Iterable[str] | None = None,
    stats: FocusStats | None = None,
) -> Iterator[bytes]:
    """The FOCUS CSV of these days (both included) and services (all when None), header
    first, in blocks of about 1 MiB. `stats`, when given, is filled before the first
    block (one more query: the rows, service-days and unpriced ones)."""
    chosen = list(services) if services is not None else None
    where = _SOME_SERVICES if chosen is not None else ""
    params = _params(since, until, chosen)
    connection.ensure_connection()
    # psycopg's own cursor (Django's wrapper has no copy()), binding on the client:
    # PostgreSQL takes no parameters in a COPY. The transaction scopes the DateStyle
    # and stays open while the caller holds the generator: read it to the end, or close it.
    with transaction.atomic(), psycopg.ClientCursor(connection.connection) as raw:
        raw.execute("SET LOCAL datestyle TO 'ISO'")
        # The rows are read in the order of the index on (service, day, position), as
        # the export writes them; sorting a million wide rows instead (the plan
        # PostgreSQL picks otherwise, parallel workers merging sorted runs) took twice
        # as long in bench/cost_focus.py.
        raw.execute("SET LOCAL enable_sort TO off")
        raw.execute("SET LOCAL max_parallel_workers_per_gather TO 0")
        if stats is not None:
            raw.execute(_COUNTS + (_SOME_SERVICES_COUNTED if where else ""), params)
            counted = raw.fetchone()
            assert counted is not None
            stats.rows, stats.service_days, stats.unpriced = counted
        statement = f"COPY ({_SELECT}{where}{_ORDER}) TO STDOUT WITH (FORMAT csv, HEADER)"
        with raw.copy(statement, params) as copy:
            buffer = bytearray()
            for row in copy:
                buffer += row
                if len(buffer) >= 1 << 20:
                    yield bytes(buffer)
                    buffer.clear()
            yield bytes(buffer)


def focus_bytes(
    since: dt.date,
    until: dt.date,
    services: Iterable[str] | None = None,
    stats: FocusStats | None = None,
) -> Iterator[bytes]:
    """The FOCUS CSV as UTF-8: by COPY on PostgreSQL, by the Python writer elsewhere."""
    if connection.vendor == "postgresql":
        yield from copy_focus(since, until, services, stats)
        return
    for line in focus_lines(since, until, services, stats):
        yield line.encode()
