"""What each service-day cost, and who it was for: the run evidence priced and split.

`cost_days` reads, for a range of days (and optionally some services), every day of run
evidence with its breakdown rows, the revision that served and its runtime, the
revision's replicas (its routed backends), the throughput its newest load test measured,
the price sheets and the release that made the revision live — in a fixed number of
queries whatever the range — and yields one `CostDay` per service and day, in service
and date order, its parts split by `releases.cost.attribution`.

**Which days.** A service-day with run evidence: the gateway's summary, else the
scrape's. A day without evidence has no cost line: the ledger does not know the service
ran. A day without breakdown rows is one part, `unattributed`, with the day's totals.
A day whose GPU model has no price sheet in force is yielded unpriced (`CostDay.priced`
is False, its parts empty): pages say so and the FOCUS export leaves it out, counting it.
"""

from __future__ import annotations

import bisect
import datetime as dt
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction

from django.conf import settings
from django.db.models import Count

from ledger.models import LoadTestReport, PriceSheet, RunBreakdown, RunSummary
from ledger.models.run_evidence import UNATTRIBUTED
from releases.cost.attribution import (
    IDLE,
    AllocationKey,
    DaySplit,
    Part,
    Usage,
    day_gpu_hours,
    split_day,
)
from releases.models import Release
from replay.models import Backend

BREAKDOWN_CHUNK = 5_000


@dataclass(frozen=True)
class ServedBy:
    """The revision that served a day, as the cost reads it."""

    revision_id: int | None
    label: str
    fingerprint: str
    gpu_model: str
    gpus_per_replica: int
    replicas: int
    output_tokens_per_s: float | None
    release: str  # "release #12", or "" when no release made it live


@dataclass(frozen=True)
class PartUsage:
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    accepted_answers: int = 0


@dataclass(frozen=True)
class CostDay:
    service: str
    date: dt.date
    served_by: ServedBy
    price_per_gpu_hour: Decimal | None
    currency: str
    price_since: dt.date | None  # the first day of the price sheet version
    split: DaySplit | None
    usage: dict[tuple[str, str], PartUsage] = field(default_factory=dict)
    service_id: int | None = None
    summary_id: int | None = None  # the run summary priced (the gateway's, if both)

    @property
    def priced(self) -> bool:
        return self.split is not None

    @property
    def parts(self) -> tuple[Part, ...]:
        return self.split.parts if self.split is not None else ()


def newest_throughputs(revision_ids: Iterable[int]) -> dict[int, float]:
    """Each revision's output tokens per second, from its newest load test that says."""
    found: dict[int, float] = {}
    for revision_id, tokens_per_s in (
        LoadTestReport.objects.filter(
            revision_id__in=list(revision_ids), output_tokens_per_s__isnull=False
        )
        .order_by("revision_id", "measured_at", "pk")
        .values_list("revision_id", "output_tokens_per_s")
    ):
        found[revision_id] = tokens_per_s  # the newest wins
    return found


class Prices:
    """The price sheets of some GPU models, read once; the version in force on a day."""

    def __init__(self, gpu_models: Iterable[str]) -> None:
        self._by_model: dict[str, list[tuple[dt.date, Decimal, str]]] = defaultdict(list)
        rows = PriceSheet.objects.filter(gpu_model__in=set(gpu_models)).order_by(
            "gpu_model", "effective_from"
        )
        for model, since, price, currency in rows.values_list(
            "gpu_model", "effective_from", "price_per_gpu_hour", "currency"
        ):
            self._by_model[model].append((since, price, currency))
        self._days = {model: [v[0] for v in versions] for model, versions in self._by_model.items()}

    def in_force(self, gpu_model: str, day: dt.date) -> tuple[Decimal, str, dt.date] | None:
        """(price per GPU-hour, currency, the version's first day)."""
        index = bisect.bisect_right(self._days.get(gpu_model, []), day) - 1
        if index < 0:
            return None
        since, price, currency = self._by_model[gpu_model][index]
        return price, currency, since


def allocation_key() -> AllocationKey:
    return AllocationKey(settings.COST_ALLOCATION_KEY)


def _summaries(
    since: dt.date,
    until: dt.date,
    services: Iterable[str] | None,
    service_ids: Iterable[int] | None = None,
) -> list[tuple[int, int, str, dt.date, int | None, tuple[int, int, int]]]:
    """(summary id, service id, service slug, day, revision id, totals) of each
    service-day, in service id and day order, the gateway's summary where both sources
    recorded the day. The totals are (requests, output tokens, input tokens). Read
    streamed (a server-side cursor), so that only the chosen rows are held, not the
    query's result as well."""
    rows = RunSummary.objects.filter(date__gte=since, date__lte=until)
    if services is not None:
        rows = rows.filter(service__slug__in=list(services))
    if service_ids is not None:
        rows = rows.filter(service_id__in=list(service_ids))
    # The rows come grouped by service and day: a day's second source replaces the row
    # before only when it is the gateway's. A service's slug and id, a day and a
    # revision id are held once however many rows name them.
    chosen: list[tuple[int, int, str, dt.date, int | None, tuple[int, int, int]]] = []
    shared: dict = {}
    last: tuple[int, dt.date] | None = None
    for (
        pk,
        service_id,
        slug,
        day,
        source,
        revision,
        requests,
        output_tokens,
        input_tokens,
    ) in (
        rows.order_by("service_id", "date", "source")
        .values_list(
            "pk",
            "service_id",
            "service__slug",
            "date",
            "source",
            "revision_id",
            "requests",
            "output_tokens",
            "input_tokens",
        )
        .iterator(chunk_size=BREAKDOWN_CHUNK)
    ):
        key = (service_id, day)
        if key == last:
            if source != RunSummary.Source.GATEWAY:
                continue
            chosen.pop()
        last = key
        chosen.append(
            (
                pk,
                shared.setdefault(("service", service_id), service_id),
                shared.setdefault(("slug", slug), slug),
                shared.setdefault(("day", day), day),
                shared.setdefault(("revision", revision), revision),
                (requests or 0, output_tokens or 0, input_tokens or 0),
            )
        )
    return chosen


def _served_by(revision_ids: set[int]) -> dict[int, ServedBy]:
    from ledger.models import Revision

    replicas = dict(
        Backend.objects.filter(revision_id__in=revision_ids, routed=True)
        .values("revision_id")
        .annotate(n=Count("pk"))
        .values_list("revision_id", "n")
    )
    throughput = newest_throughputs(revision_ids)
    releases = dict(
        Release.objects.filter(to_revision_id__in=revision_ids, state=Release.State.RELEASED)
        .order_by("to_revision_id", "pk")
        .values_list("to_revision_id", "pk")
    )
    found = {}
    for revision in Revision.objects.filter(pk__in=revision_ids).select_related("runtime"):
        found[revision.pk] = ServedBy(
            revision_id=revision.pk,
            label=revision.label,
            fingerprint=revision.fingerprint,
            gpu_model=revision.runtime.gpu_model,
            gpus_per_replica=revision.runtime.gpu_count,
            replicas=max(replicas.get(revision.pk, 0), 1),
            output_tokens_per_s=throughput.get(revision.pk),
            release=f"release #{releases[revision.pk]}" if revision.pk in releases else "",
        )
    return found


UNKNOWN_REVISION = ServedBy(None, "", "", "", 1, 1, None, "")


def _rows_by_summary(
    since: dt.date,
    until: dt.date,
    services: list[str] | None,
    service_ids: list[int] | None = None,
) -> Iterator[tuple[tuple[int, dt.date, int], list[tuple]]]:
    """Each summary's breakdown rows, streamed in (service id, day, summary) order: the
    order `_summaries` gives (integers and dates: no collation can reorder them), so
    `cost_days` merges the two without holding the rows."""
    query = RunBreakdown.objects.filter(summary__date__gte=since, summary__date__lte=until)
    if services is not None:
        query = query.filter(summary__service__slug__in=services)
    if service_ids is not None:
        query = query.filter(summary__service_id__in=service_ids)
    current: tuple[int, dt.date, int] | None = None
    rows: list[tuple] = []
    for row in (
        query.order_by(
            "summary__service_id", "summary__date", "summary_id", "tenant", "task_type", "backend"
        )
        .values_list(
            "summary__service_id",
            "summary__date",
            "summary_id",
            "tenant",
            "task_type",
            "requests",
            "input_tokens",
            "output_tokens",
            "errors_4xx",
            "errors_5xx",
            "refusals",
            "returned_by_humans",
            "ttft_p50_ms",
            "tpot_p50_ms",
        )
        .iterator(chunk_size=BREAKDOWN_CHUNK)
    ):
        key = (row[0], row[1], row[2])
        if key != current:
            if current is not None:
                yield current, rows
            current, rows = key, []
        rows.append(row[3:])
    if current is not None:
        yield current, rows


def _usage(rows: list[tuple]) -> tuple[list[Usage], dict[tuple[str, str], PartUsage]]:
    usage = []
    totals: dict[tuple[str, str], list[int]] = {}
    for (
        tenant,
        task_type,
        requests,
        input_tokens,
        output_tokens,
        errors_4xx,
        errors_5xx,
        refusals,
        returned,
        ttft,
        tpot,
    ) in rows:
        usage.append(Usage(tenant, task_type, requests, output_tokens, ttft, tpot))
        accepted = max(requests - errors_4xx - errors_5xx - refusals - returned, 0)
        sums = totals.setdefault((tenant, task_type), [0, 0, 0, 0])
        sums[0] += requests
        sums[1] += input_tokens
        sums[2] += output_tokens
        sums[3] += accepted
    return usage, {key: PartUsage(*values) for key, values in totals.items()}


def cost_days(
    since: dt.date,
    until: dt.date,
    services: Iterable[str] | None = None,
    *,
    service_ids: Iterable[int] | None = None,
) -> Iterator[CostDay]:
    """Every service-day with run evidence from `since` to `until` (both included), of
    these services (by slug, or by id; all when neither is given)."""
    services = list(services) if services is not None else None
    ids = list(service_ids) if service_ids is not None else None
    summaries = _summaries(since, until, services, ids)
    revisions = {revision for *_, revision, _totals in summaries if revision}
    served = _served_by(revisions)
    prices = Prices({s.gpu_model for s in served.values() if s.gpu_model})
    key = allocation_key()
    if not summaries:
        return
    groups = _rows_by_summary(since, until, services, ids)
    group = next(groups, None)
    for pk, service_id, slug, day, revision, totals in summaries:
        served_by = served.get(revision, UNKNOWN_REVISION) if revision else UNKNOWN_REVISION
        while group is not None and group[0] < (service_id, day, pk):
            group = next(groups, None)  # the rows of a day's other source
        rows = None
        if group is not None and group[0] == (service_id, day, pk):
            rows = group[1]
            group = next(groups, None)
        if rows:
            usage, part_usage = _usage(rows)
        else:
            requests, output_tokens, input_tokens = totals
            usage = [Usage(UNATTRIBUTED, UNATTRIBUTED, requests, output_tokens)]
            part_usage = {
                (UNATTRIBUTED, UNATTRIBUTED): PartUsage(requests, input_tokens, output_tokens, 0)
            }
        price = prices.in_force(served_by.gpu_model, day) if served_by.gpu_model else None
        split = None
        if price is not None:
            split = split_day(
                usage,
                gpu_hours=day_gpu_hours(served_by.replicas, served_by.gpus_per_replica),
                price_per_gpu_hour=price[0],
                output_tokens_per_s=served_by.output_tokens_per_s,
                replicas=served_by.replicas,
                key=key,
            )
        yield CostDay(
            service=slug,
            date=day,
            served_by=served_by,
            price_per_gpu_hour=price[0] if price else None,
            currency=price[1] if price else "",
            price_since=price[2] if price else None,
            split=split,
            usage=part_usage,
            service_id=service_id,
            summary_id=pk,
        )


# The stored rows (`releases.models.CostShare`) in `CostDay`'s shape.
_STORED_FIELDS = (
    "service_id",
    "service__slug",
    "date",
    "position",
    "priced",
    "revision_id",
    "revision_label",
    "fingerprint",
    "gpu_model",
    "gpus_per_replica",
    "replicas",
    "output_tokens_per_s",
    "release",
    "price_per_gpu_hour",
    "currency",
    "price_since",
    "allocation_key",
    "capacity_known",
    "used_share",
    "day_gpu_hours",
    "tenant",
    "task_type",
    "gpu_hours",
    "cost",
    "requests",
    "input_tokens",
    "output_tokens",
    "accepted_answers",
)


def _stored_day(rows: list[tuple]) -> CostDay:
    (
        _service_id,
        slug,
        day,
        _position,
        priced,
        revision_id,
        label,
        fingerprint,
        gpu_model,
        gpus_per_replica,
        replicas,
        tokens_per_s,
        release,
        price,
        currency,
        price_since,
        key,
        capacity_known,
        used,
        day_hours,
        *_part,
    ) = rows[0]
    served_by = ServedBy(
        revision_id,
        label,
        fingerprint,
        gpu_model,
        gpus_per_replica,
        replicas,
        tokens_per_s,
        release,
    )
    if not priced:
        return CostDay(slug, day, served_by, None, "", None, None)
    parts = []
    usage = {}
    for row in rows:
        tenant, task_type, hours, cost, requests, input_tokens, output_tokens, accepted = row[20:]
        parts.append(Part(tenant, task_type, Fraction(hours), cost))
        if tenant != IDLE or task_type:
            usage[(tenant, task_type)] = PartUsage(requests, input_tokens, output_tokens, accepted)
    split = DaySplit(
        Fraction(day_hours),
        sum((part.cost for part in parts), Decimal("0.00")),
        Fraction(used),
        capacity_known,
        AllocationKey(key),
        tuple(parts),
    )
    return CostDay(slug, day, served_by, price, currency, price_since, split, usage)


def stored_cost_days(
    since: dt.date, until: dt.date, services: Iterable[str] | None = None
) -> Iterator[CostDay]:
    """The service-days `cost_days` yields, as they were computed when their facts were
    recorded (`releases.cost.services.record_cost`): one query, streamed, in the same
    order (service id, day). `Part.gpu_hours` is to the microhour, as the rows hold it."""
    from releases.models import CostShare

    rows = CostShare.objects.filter(date__gte=since, date__lte=until)
    if services is not None:
        rows = rows.filter(service__slug__in=list(services))
    current: tuple[int, dt.date] | None = None
    day_rows: list[tuple] = []
    for row in (
        rows.order_by("service_id", "date", "position")
        .values_list(*_STORED_FIELDS)
        .iterator(chunk_size=BREAKDOWN_CHUNK)
    ):
        key = (row[0], row[2])
        if key != current:
            if day_rows:
                yield _stored_day(day_rows)
            current, day_rows = key, []
        day_rows.append(row)
    if day_rows:
        yield _stored_day(day_rows)
