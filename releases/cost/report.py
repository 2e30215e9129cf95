"""The cost pages' numbers: the stored cost (`stored_cost_days`) summed by tenant, task type, revision, service
and day, with the cost per million output tokens and per accepted answer.

An accepted answer is a request that did not fail (4xx, 5xx), was not refused and was
not sent back by a person (`RunBreakdown.accepted_answers`). Days without breakdown rows
have no accepted answers on record, so their cost per accepted answer is unknown ("—").
Amounts of different currencies are never added: a report holds one currency, the one
most of its cost is in, and counts the service-days of any other apart (`other_currency`).
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction

from releases.cost.attribution import IDLE
from releases.cost.queries import CostDay, stored_cost_days
from releases.models import Release

MILLION = Decimal(1_000_000)


@dataclass
class CostLine:
    """One row of a table: a tenant, a task type, a revision, a service or a day."""

    name: str
    cost: Decimal = Decimal(0)
    gpu_hours: Fraction = Fraction(0)
    requests: int = 0
    output_tokens: int = 0
    accepted_answers: int = 0

    @property
    def per_million_output_tokens(self) -> Decimal | None:
        if not self.output_tokens:
            return None
        return (self.cost * MILLION / self.output_tokens).quantize(Decimal("0.01"))

    @property
    def per_accepted_answer(self) -> Decimal | None:
        if not self.accepted_answers:
            return None
        return (self.cost / self.accepted_answers).quantize(Decimal("0.0001"))

    @property
    def gpu_hours_shown(self) -> float:
        return float(self.gpu_hours)


@dataclass
class DayCost:
    date: dt.date
    used: Decimal = Decimal(0)
    idle: Decimal = Decimal(0)
    output_tokens: int = 0


@dataclass(frozen=True)
class Marker:
    """A line on the trend: a release that reached 100 % within the period ("released"),
    or, on one service's page, a day its served revision changed ("serving")."""

    date: dt.date
    label: str
    url: str
    kind: str = "released"


@dataclass
class CostReport:
    since: dt.date
    until: dt.date
    currency: str = ""
    total: CostLine = field(default_factory=lambda: CostLine("total"))
    idle: CostLine = field(default_factory=lambda: CostLine(IDLE))
    by_tenant: dict[str, CostLine] = field(default_factory=dict)
    by_task_type: dict[str, CostLine] = field(default_factory=dict)
    by_revision: dict[str, CostLine] = field(default_factory=dict)
    by_service: dict[str, CostLine] = field(default_factory=dict)
    by_day: dict[dt.date, DayCost] = field(default_factory=dict)
    service_days: int = 0
    unpriced: int = 0
    capacity_unknown: int = 0
    other_currency: int = 0
    markers: list[Marker] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return self.service_days == 0

    def rows(self, lines: dict[str, CostLine]) -> list[CostLine]:
        return sorted(lines.values(), key=lambda line: (-line.cost, line.name))

    @property
    def tenants(self) -> list[CostLine]:
        return self.rows(self.by_tenant)

    @property
    def task_types(self) -> list[CostLine]:
        return self.rows(self.by_task_type)

    @property
    def revisions(self) -> list[CostLine]:
        return self.rows(self.by_revision)

    @property
    def services(self) -> list[CostLine]:
        return self.rows(self.by_service)

    @property
    def days(self) -> list[DayCost]:
        return [self.by_day[day] for day in sorted(self.by_day)]


def _add(line: CostLine, cost: Decimal, hours: Fraction, usage) -> None:
    line.cost += cost
    line.gpu_hours += hours
    if usage is not None:
        line.requests += usage.requests
        line.output_tokens += usage.output_tokens
        line.accepted_answers += usage.accepted_answers


def _main_currency(days: list[CostDay]) -> str:
    counted = Counter(day.currency for day in days if day.priced)
    return counted.most_common(1)[0][0] if counted else ""


def build_report(days: Iterable[CostDay], since: dt.date, until: dt.date) -> CostReport:
    days = list(days)
    report = CostReport(since, until, currency=_main_currency(days))
    for day in days:
        report.service_days += 1
        if not day.priced:
            report.unpriced += 1
            continue
        if day.currency != report.currency:
            report.other_currency += 1
            continue
        assert day.split is not None
        if not day.split.capacity_known:
            report.capacity_unknown += 1
        daily = report.by_day.setdefault(day.date, DayCost(day.date))
        service = report.by_service.setdefault(day.service, CostLine(day.service))
        revision_name = f"{day.service} {day.served_by.label}".strip()
        revision = report.by_revision.setdefault(revision_name, CostLine(revision_name))
        for part in day.split.parts:
            usage = day.usage.get((part.tenant, part.task_type))
            _add(report.total, part.cost, part.gpu_hours, usage)
            _add(service, part.cost, part.gpu_hours, usage)
            _add(revision, part.cost, part.gpu_hours, usage)
            if part.tenant == IDLE:
                _add(report.idle, part.cost, part.gpu_hours, None)
                daily.idle += part.cost
                continue
            daily.used += part.cost
            daily.output_tokens += usage.output_tokens if usage else 0
            tenant = report.by_tenant.setdefault(part.tenant, CostLine(part.tenant))
            _add(tenant, part.cost, part.gpu_hours, usage)
            task = report.by_task_type.setdefault(part.task_type, CostLine(part.task_type))
            _add(task, part.cost, part.gpu_hours, usage)
    return report


def _markers(since: dt.date, until: dt.date, services: list[str] | None) -> list[Marker]:
    from django.urls import reverse

    released = Release.objects.filter(
        state=Release.State.RELEASED,
        closed_at__date__gte=since,
        closed_at__date__lte=until,
    ).select_related("service", "to_revision")
    if services is not None:
        released = released.filter(service__slug__in=services)
    return [
        Marker(
            release.closed_at.date(),
            f"{release.service.slug} {release.to_revision.label}",
            reverse("releases:release_detail", args=[release.pk]),
        )
        for release in released.order_by("closed_at")
    ]


def _switches(days: list[CostDay]) -> list[Marker]:
    """Where one service's served revision changes from a day to the next (a release, a
    rollback or a live revision set by hand): a line on its own page's trend."""
    from django.urls import reverse

    found = []
    for before, after in itertools.pairwise(days):
        revision = after.served_by
        if revision.revision_id != before.served_by.revision_id and revision.label:
            number = revision.label.removeprefix("r")
            url = reverse("ledger:revision_detail", args=[after.service, int(number)])
            found.append(Marker(after.date, f"{after.service} {revision.label}", url, "serving"))
    return found


def cost_report(
    since: dt.date, until: dt.date, services: Iterable[str] | None = None
) -> CostReport:
    """The report of these days (both included) and services (all when None). One
    service's report also marks the days its served revision changed."""
    chosen = list(services) if services is not None else None
    days = list(stored_cost_days(since, until, chosen))
    report = build_report(days, since, until)
    report.markers = _markers(since, until, chosen)
    if chosen is not None and len(chosen) == 1:
        report.markers = sorted([*report.markers, *_switches(days)], key=lambda m: m.date)
    return report


def last_days(days: int) -> tuple[dt.date, dt.date]:
    """The last `days` whole days (UTC), yesterday the last: today is not over."""
    from django.utils import timezone

    last = timezone.now().astimezone(dt.UTC).date() - dt.timedelta(days=1)
    return last - dt.timedelta(days=days - 1), last


def recent_cost(services: list[str], days: int) -> CostReport:
    """These services' report over the last `days` whole days, without the release
    markers (the catalog's column); an empty report, without a query, when there are
    no services (an empty page of the catalog)."""
    since, until = last_days(days)
    if not services:
        return CostReport(since, until)
    return build_report(stored_cost_days(since, until, services), since, until)
