"""A revision's load-test reports as its page shows them, and a report's levels.

`revision_reports` reads every report of a revision with its status and
today's goodput, and the newest current report of each workload class with
its parsed levels, in a fixed number of queries whatever the number of
reports.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeAlias, TypedDict, cast

from django.utils import timezone

from ledger.charts import LatencyPoint
from ledger.models import LoadTestReport, LoadTestRequestData, Revision, Service
from ledger.queries.capacity import pct
from ledger.queries.chart_data import latency_point
from ledger.queries.goodput import GoodputResult, goodput_slo, needs_recompute, report_goodput
from ledger.queries.staleness import EvidenceStatus, evidence_status, newest_by_workload

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

LATENCY_METRICS = (("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2e", "End to end"))


class ReportPageAttrs(TypedDict):
    """Set by `revision_reports` (`goodput_*` by `attach_goodputs`) for pages."""

    status: EvidenceStatus
    error_rate_pct: float | None
    goodput_now: GoodputResult
    goodput_pct: float | None


ReportForPage: TypeAlias = "WithAnnotations[LoadTestReport, ReportPageAttrs]"


def attach_goodputs(reports: Sequence[ReportForPage], service: Service) -> None:
    """Set `goodput_now` and `goodput_pct` on each report against today's SLOs, reading
    the per-request arrays of those whose SLOs changed since import in one query
    (none when unchanged)."""
    slo = goodput_slo(service)
    stale_slo = [r.pk for r in reports if needs_recompute(r, slo)]
    arrays = (
        {d.report_id: d for d in LoadTestRequestData.objects.filter(report__in=stale_slo)}
        if stale_slo
        else {}
    )
    for report in reports:
        report.goodput_now = report_goodput(report, service, request_data=arrays.get(report.pk))
        report.goodput_pct = pct(report.goodput_now.value)


class RevisionReports(TypedDict):
    reports: list[ReportForPage]
    # The first level of the newest current report of each workload class.
    latency_points: list[LatencyPoint]
    stale_count: int


def revision_reports(revision: Revision, *, now: dt.datetime | None = None) -> RevisionReports:
    """`revision` comes with its service and runtime.

    Queries: 1 the reports with their uploader (without the parsed levels), 2 the
    parsed levels of the newest current report of each workload class (when there
    is one), and the per-request arrays of reports whose goodput must be
    recomputed because the SLOs changed (only then).
    """
    now = now or timezone.now()
    reports = cast(
        "list[ReportForPage]",
        list(
            LoadTestReport.objects.filter(revision=revision)
            .select_related("uploaded_by")
            .defer("results")
        ),
    )
    for report in reports:
        report.revision = revision
        report.status = evidence_status(report, now=now)
        report.error_rate_pct = pct(report.error_rate)
    attach_goodputs(reports, revision.service)

    newest = newest_by_workload(r for r in reports if r.status.counts)
    points = []
    if newest:
        results = dict(
            LoadTestReport.objects.filter(pk__in=[r.pk for r in newest.values()]).values_list(
                "pk", "results"
            )
        )
        for report in newest.values():
            report.results = results[report.pk]
            points.append(latency_point(report, status="current"))
    return {
        "reports": reports,
        "latency_points": points,
        # Stale, mismatched and (in production) unverified reports are left out of the chart.
        "stale_count": sum(1 for r in reports if not r.status.counts),
    }


def shaped_levels(levels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every level of a parsed report with what its tables show (no computation of our own)."""
    shaped = []
    for level in levels:
        conditions = level.get("conditions", {})
        latency = level.get("latency_ms", {})
        metrics = [
            {"key": key, "label": label, **latency[key]}
            for key, label in LATENCY_METRICS
            if latency.get(key) and any(v is not None for v in latency[key].values())
        ]
        shaped.append(
            {
                "name": level["name"],
                "source": level.get("source", ""),
                "conditions": conditions,
                "error_rate_pct": pct(conditions.get("error_rate")),
                "latency": latency,
                "metrics": metrics,
                "throughput": level.get("throughput") or {},
            }
        )
    return shaped
