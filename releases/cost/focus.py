"""The cost as a FinOps FOCUS 1.0 CSV: one row per service, day, tenant and task type,
and one `x_Tenant=idle` row per service-day for the capacity no tenant used.

Every column FOCUS 1.0 requires is written, in the specification's order, then the
ledger's own (`x_` columns, as FOCUS names custom ones). The ledger is an internal
platform charging its tenants back, so:

- `BilledCost`, `EffectiveCost`, `ListCost` and `ContractedCost` are the same amount:
  no discount, no commitment; `ListUnitPrice` and `ContractedUnitPrice` are the price
  sheet's price per GPU-hour, `PricingQuantity` and `ConsumedQuantity` the GPU-hours.
- `ChargeCategory=Usage`, `ChargeFrequency=Usage-Based`, `PricingCategory=Standard`;
  `ChargeClass` and the commitment-discount columns are empty (null).
- `ChargePeriodStart/End` are the day (UTC), `BillingPeriodStart/End` its month.
- `Provider`, `Publisher` and `InvoiceIssuer` are `COST_PROVIDER_NAME`; the billing
  account is `COST_BILLING_ACCOUNT_ID`, the sub-account the service's team.
- `ServiceName` is the service's slug, `ServiceCategory` "AI and Machine Learning",
  `ResourceId` the revision's fingerprint, `ResourceName` "<slug> <revision>",
  `SkuId` the GPU model and `SkuPriceId` "<GPU model>@<the price sheet's first day>".
- `Tags` is a JSON object: tenant, task type, GPU model, and the allocation key.
- A tenant or team name a spreadsheet would run as a formula (`=…`, `+…`) is written
  with a leading `'`, as every CSV export of the ledger does.

A service-day without a price sheet in force has no row: `FocusStats.unpriced` counts
them, and `export_cost` says how many.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

from django.conf import settings

from ledger.exports.tabular import spreadsheet_safe
from releases.cost.attribution import IDLE
from releases.cost.queries import CostDay, allocation_key, stored_cost_days

FOCUS_COLUMNS = (
    "AvailabilityZone",
    "BilledCost",
    "BillingAccountId",
    "BillingAccountName",
    "BillingCurrency",
    "BillingPeriodEnd",
    "BillingPeriodStart",
    "ChargeCategory",
    "ChargeClass",
    "ChargeDescription",
    "ChargeFrequency",
    "ChargePeriodEnd",
    "ChargePeriodStart",
    "CommitmentDiscountCategory",
    "CommitmentDiscountId",
    "CommitmentDiscountName",
    "CommitmentDiscountStatus",
    "CommitmentDiscountType",
    "ConsumedQuantity",
    "ConsumedUnit",
    "ContractedCost",
    "ContractedUnitPrice",
    "EffectiveCost",
    "InvoiceIssuer",
    "ListCost",
    "ListUnitPrice",
    "PricingCategory",
    "PricingQuantity",
    "PricingUnit",
    "Provider",
    "Publisher",
    "RegionId",
    "RegionName",
    "ResourceId",
    "ResourceName",
    "ResourceType",
    "ServiceCategory",
    "ServiceName",
    "SkuId",
    "SkuPriceId",
    "SubAccountId",
    "SubAccountName",
    "Tags",
)
CUSTOM_COLUMNS = (
    "x_Tenant",
    "x_TaskType",
    "x_Release",
    "x_Revision",
    "x_InputTokens",
    "x_OutputTokens",
    "x_Requests",
    "x_AcceptedAnswers",
)
COLUMNS = FOCUS_COLUMNS + CUSTOM_COLUMNS
GPU_HOURS = "GPU-Hours"
SERVICE_CATEGORY = "AI and Machine Learning"
RESOURCE_TYPE = "Model service revision"
QUANTITY = Decimal("0.000001")


@dataclass
class FocusStats:
    rows: int = 0
    service_days: int = 0
    unpriced: int = 0


def _moment(day: dt.date) -> str:
    return f"{day.isoformat()}T00:00:00Z"


def _month(day: dt.date) -> tuple[str, str]:
    first = day.replace(day=1)
    following = (first + dt.timedelta(days=32)).replace(day=1)
    return _moment(first), _moment(following)


def _quantity(hours: Fraction) -> str:
    exact = Decimal(hours.numerator) / Decimal(hours.denominator)
    return str(exact.quantize(QUANTITY))


def charge_description(day: CostDay, tenant: str, task_type: str) -> str:
    """A part's ChargeDescription, spreadsheet-safe."""
    label = day.served_by.label
    if tenant == IDLE:
        return spreadsheet_safe(f"Idle GPU capacity of {day.service} {label}")
    return spreadsheet_safe(
        f"GPU-hours of {day.service} {label} for tenant {tenant}, task type {task_type}"
    )


def focus_tags(tenant: str, task_type: str, gpu_model: str, key: str) -> str:
    """A part's Tags: a JSON object of its tenant, task type, GPU model and the key."""
    fields = {"tenant": tenant, "gpu_model": gpu_model, "allocation_key": key}
    if tenant != IDLE:
        fields["task_type"] = task_type
    return json.dumps(fields, sort_keys=True)


def focus_rows(
    days: Iterable[CostDay], teams: dict[str, str], stats: FocusStats
) -> Iterator[list[object]]:
    """The CSV rows (cells in `COLUMNS` order) of these service-days."""
    key = str(allocation_key())
    provider = settings.COST_PROVIDER_NAME
    account = settings.COST_BILLING_ACCOUNT_ID
    # What repeats across rows, written once: a day's periods, and the Tags of each
    # (tenant, task type, GPU model).
    periods: dict[dt.date, tuple[str, str, str, str]] = {}
    tagged: dict[tuple[str, str, str], str] = {}
    for day in days:
        stats.service_days += 1
        if not day.priced:
            stats.unpriced += 1
            continue
        served = day.served_by
        if (period := periods.get(day.date)) is None:
            period = periods[day.date] = (
                *_month(day.date),
                _moment(day.date),
                _moment(day.date + dt.timedelta(days=1)),
            )
        billing_start, billing_end, charge_start, charge_end = period
        price = str(day.price_per_gpu_hour)
        team = spreadsheet_safe(teams.get(day.service, ""))
        for part in day.parts:
            usage = day.usage.get((part.tenant, part.task_type))
            cost = str(part.cost)
            hours = _quantity(part.gpu_hours)
            what = charge_description(day, part.tenant, part.task_type)
            tags = tagged.get((part.tenant, part.task_type, served.gpu_model))
            if tags is None:
                tags = tagged[(part.tenant, part.task_type, served.gpu_model)] = focus_tags(
                    part.tenant, part.task_type, served.gpu_model, key
                )
            stats.rows += 1
            yield [
                "",
                cost,
                account,
                account,
                day.currency,
                billing_end,
                billing_start,
                "Usage",
                "",
                what,
                "Usage-Based",
                charge_end,
                charge_start,
                "",
                "",
                "",
                "",
                "",
                hours,
                GPU_HOURS,
                cost,
                price,
                cost,
                provider,
                cost,
                price,
                "Standard",
                hours,
                GPU_HOURS,
                provider,
                provider,
                "",
                "",
                served.fingerprint,
                f"{day.service} {served.label}".strip(),
                RESOURCE_TYPE,
                SERVICE_CATEGORY,
                day.service,
                served.gpu_model,
                f"{served.gpu_model}@{day.price_since.isoformat()}" if day.price_since else "",
                team,
                team,
                tags,
                spreadsheet_safe(part.tenant),
                part.task_type,
                served.release,
                served.label,
                usage.input_tokens if usage else 0,
                usage.output_tokens if usage else 0,
                usage.requests if usage else 0,
                usage.accepted_answers if usage else 0,
            ]


def _service_teams(services: list[str] | None) -> dict[str, str]:
    from ledger.models import Service

    rows = Service.objects.all()
    if services is not None:
        rows = rows.filter(slug__in=services)
    return dict(rows.values_list("slug", "team__name"))


def focus_lines(
    since: dt.date,
    until: dt.date,
    services: Iterable[str] | None = None,
    stats: FocusStats | None = None,
    read: Callable[..., Iterable[CostDay]] = stored_cost_days,
) -> Iterator[str]:
    """The FOCUS CSV of these days (and services), header first, one line at a time,
    written in Python from the stored cost (the reference `copy_focus` must equal), or
    from what `read` yields (`cost_days`: the cost computed now)."""
    stats = stats if stats is not None else FocusStats()
    services = list(services) if services is not None else None
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    yield buffer.getvalue()
    teams = _service_teams(services)
    for row in focus_rows(read(since, until, services), teams, stats):
        buffer.seek(0)
        buffer.truncate()
        writer.writerow(row)
        yield buffer.getvalue()


def period_days(since: dt.datetime, until: dt.datetime) -> tuple[dt.date, dt.date]:
    """The days (UTC) a period of moments touches, `until` excluded: an audit
    period from 2026-10-01 00:00 to 2026-11-01 00:00 is October's 31 days."""
    last = (until - dt.timedelta(microseconds=1)).astimezone(dt.UTC).date()
    return since.astimezone(dt.UTC).date(), last
