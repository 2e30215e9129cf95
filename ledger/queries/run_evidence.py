"""Reading daily run evidence: a summary as JSON, and a service's trend against its SLOs."""

from __future__ import annotations

import datetime as dt
import itertools
import json
from collections.abc import Callable
from typing import Any, TypedDict

from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from ledger.models import Event, Revision, RunBreakdown, RunSummary, Service
from ledger.models.run_evidence import RUN_SUMMARY_FIELDS


def run_summary_json(summary: RunSummary) -> dict[str, Any]:
    """What `manage.py import_metrics` prints: the stored day, every field."""
    return {
        "service": summary.service.slug,
        "date": summary.date.isoformat(),
        "source": summary.source,
        "revision": summary.revision.label if summary.revision else None,
        **{name: getattr(summary, name) for name in RUN_SUMMARY_FIELDS},
        "error_rate": summary.error_rate,
        "recorded_at": summary.recorded_at.isoformat(),
    }


def run_summaries() -> QuerySet[RunSummary]:
    """Days with their service, revision and recorder, and `breakdown_rows`: how many
    breakdown rows each has (a subquery per day on the rows' unique index, not a join)."""
    rows = (
        RunBreakdown.objects.filter(summary=OuterRef("pk"))
        .order_by()
        .values("summary")
        .annotate(count=Count("*"))
        .values("count")
    )
    return RunSummary.objects.with_context().annotate(
        breakdown_rows=Coalesce(Subquery(rows, output_field=IntegerField()), Value(0))
    )


def day_breakdown(service_slug: str, date: dt.date, source: str) -> QuerySet[RunBreakdown] | None:
    """The breakdown rows of one service's day from one source, tenant by tenant; None when
    that day was not recorded. One query for the day, the rows' query is the caller's."""
    summary_id = (
        RunSummary.objects.filter(service__slug=service_slug, date=date, source=source)
        .values_list("pk", flat=True)
        .first()
    )
    if summary_id is None:
        return None
    return RunBreakdown.objects.filter(summary_id=summary_id).order_by(
        "tenant", "task_type", "backend"
    )


# ---------------------------------------------------------------- the service's trend

TREND_DAYS = 60


class TrendPoint(TypedDict):
    """One day of the trend: the gateway's numbers, else the scrape's."""

    date: dt.date
    source: str
    revision: str | None
    requests: int | None
    ttft_p95_ms: float | None
    error_rate_pct: float | None
    ttft_breached: bool
    error_breached: bool


class TrendMarker(TypedDict):
    """Something that changed the service on a day: drawn as a line across the trend."""

    date: dt.date
    kind: str  # "live revision", "served revision"; releases adds "release", "rollback", "waiver"
    label: str


class Trend(TypedDict):
    start: dt.date
    end: dt.date
    points: list[TrendPoint]
    markers: list[TrendMarker]
    slo_ttft_p95_ms: float | None
    slo_error_rate_pct: float | None


MarkerSource = Callable[[Service, dt.date, dt.date], list[TrendMarker]]
_MARKER_SOURCES: list[MarkerSource] = []


def register_trend_markers(source: MarkerSource) -> MarkerSource:
    """Add a source of markers for the trend (a higher app's releases, rollbacks and
    waivers: `releases` registers its own in its AppConfig.ready(), as lock rules are
    registered). Each is called with (service, first day, last day) and makes a
    constant number of queries."""
    if source not in _MARKER_SOURCES:
        _MARKER_SOURCES.append(source)
    return source


@register_trend_markers
def live_revision_markers(service: Service, start: dt.date, end: dt.date) -> list[TrendMarker]:
    """Each change of the live revision in the window, from the ledger's events."""
    since = dt.datetime.combine(start, dt.time.min, tzinfo=dt.UTC)
    until = dt.datetime.combine(end + dt.timedelta(days=1), dt.time.min, tzinfo=dt.UTC)
    changes = list(
        Event.objects.filter(
            service=service,
            action="service.live_revision_changed",
            created_at__gte=since,
            created_at__lt=until,
        )
        .order_by("sequence")
        .values_list("created_at", "payload")
    )
    if not changes:
        return []
    payloads = [json.loads(payload) for _, payload in changes]
    ids = {p.get("after", {}).get("live_revision") for p in payloads}
    numbers = dict(Revision.objects.filter(pk__in=ids - {None}).values_list("pk", "number"))
    markers: list[TrendMarker] = []
    for (created_at, _), payload in zip(changes, payloads, strict=True):
        number = numbers.get(payload.get("after", {}).get("live_revision"))
        markers.append(
            {
                "date": created_at.astimezone(dt.UTC).date(),
                "kind": "live revision",
                "label": f"r{number} live" if number is not None else "live revision changed",
            }
        )
    return markers


def _served_revision_markers(
    points: list[TrendPoint], markers: list[TrendMarker]
) -> list[TrendMarker]:
    """Where the run evidence itself says another revision served from one day to the next
    (the gateway names it), unless the ledger already marks that revision going live."""
    marked = {
        (m["date"], m["label"].split(" ")[0]) for m in markers if m["kind"] == "live revision"
    }
    found: list[TrendMarker] = []
    for earlier, later in itertools.pairwise(points):
        revision = later["revision"]
        if revision is None or earlier["revision"] is None or revision == earlier["revision"]:
            continue
        if (later["date"], revision) not in marked:
            found.append(
                {"date": later["date"], "kind": "served revision", "label": f"{revision} serving"}
            )
    return found


def _pct(rate: float | None) -> float | None:
    return None if rate is None else rate * 100


def run_trend(service: Service, *, days: int = TREND_DAYS, today: dt.date | None = None) -> Trend:
    """The last `days` full days and today of run evidence against the SLOs, with what
    changed marked.

    One query for the days (the unique index on service, date and source), then
    one or two per marker source.
    """
    end = today or timezone.now().astimezone(dt.UTC).date()
    start = end - dt.timedelta(days=days)
    rows = (
        RunSummary.objects.filter(service=service, date__gte=start, date__lte=end)
        .order_by("date", "source")  # "gateway" before "scrape"
        .values_list("date", "source", "revision__number", "requests", "ttft_p95_ms", "error_rate")
    )
    slo_ttft = float(service.slo_ttft_p95_ms) if service.slo_ttft_p95_ms is not None else None
    slo_error = (
        float(service.slo_error_rate_pct) if service.slo_error_rate_pct is not None else None
    )
    points: list[TrendPoint] = []
    for date, source, number, requests, ttft, error_rate in rows:
        if points and points[-1]["date"] == date:
            continue  # the gateway's day already holds it
        error_pct = _pct(error_rate)
        points.append(
            {
                "date": date,
                "source": source,
                "revision": f"r{number}" if number is not None else None,
                "requests": requests,
                "ttft_p95_ms": ttft,
                "error_rate_pct": error_pct,
                "ttft_breached": slo_ttft is not None and ttft is not None and ttft > slo_ttft,
                "error_breached": (
                    slo_error is not None and error_pct is not None and error_pct > slo_error
                ),
            }
        )
    markers = [m for source in _MARKER_SOURCES for m in source(service, start, end)]
    markers.extend(_served_revision_markers(points, markers))
    markers.sort(key=lambda marker: (marker["date"], marker["kind"]))
    return {
        "start": start,
        "end": end,
        "points": points,
        "markers": markers,
        "slo_ttft_p95_ms": slo_ttft,
        "slo_error_rate_pct": slo_error,
    }
