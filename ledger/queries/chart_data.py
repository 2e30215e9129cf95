"""Plain data for the evidence charts of `ledger.charts`, read from reports."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from django.utils import timezone

from ledger.charts import CdfSeries, LatencyPoint, LevelPoint, Slo
from ledger.models import LoadTestReport
from ledger.queries.capacity import level_within_slo, load_axis, load_of, pct
from ledger.queries.staleness import evidence_status, newest_by_workload


def latency_point(report: LoadTestReport, *, status: str = "") -> LatencyPoint:
    """The first level's TTFT and TPOT percentiles, for `ledger.charts`."""
    level = report.headline_level or {}
    latency = level.get("latency_ms", {})
    ttft, tpot = latency.get("ttft") or {}, latency.get("tpot") or {}
    return {
        "workload": report.workload,
        "label": report.get_workload_display(),
        "ttft_p50_ms": ttft.get("p50"),
        "ttft_p95_ms": ttft.get("p95"),
        "ttft_p99_ms": ttft.get("p99"),
        "tpot_p50_ms": tpot.get("p50"),
        "tpot_p95_ms": tpot.get("p95"),
        "tpot_p99_ms": tpot.get("p99"),
        "status": status,
    }


def latency_points(
    reports: Iterable[LoadTestReport], *, now: dt.datetime | None = None
) -> list[LatencyPoint]:
    """One point per workload class from the newest report of each (reports
    fetched `with_context()`), with its current/stale word."""
    now = now or timezone.now()
    return [
        latency_point(report, status=evidence_status(report, now=now).status)
        for report in newest_by_workload(reports).values()
    ]


def level_points(report: LoadTestReport, slo: Slo) -> list[LevelPoint]:
    """Every load level of a report, for the throughput-latency curve."""
    axis = load_axis(report.levels)
    points: list[LevelPoint] = []
    for level in report.levels:
        latency = level.get("latency_ms", {})
        within, _ = level_within_slo(level, slo)
        has_slo = (
            slo["ttft_p95_ms"] is not None
            or slo["tpot_ms"] is not None
            or slo["error_rate_pct"] is not None
        )
        points.append(
            {
                "name": level["name"],
                "load": load_of(level, axis),
                "load_axis": axis,
                "output_tokens_per_s": (level.get("throughput") or {}).get("output_tokens_per_s"),
                "ttft_p95_ms": (latency.get("ttft") or {}).get("p95"),
                "tpot_p95_ms": (latency.get("tpot") or {}).get("p95"),
                "error_rate_pct": pct(level.get("conditions", {}).get("error_rate")),
                "within_slo": within if has_slo else None,
            }
        )
    return points


def ttft_cdf_series(report: LoadTestReport) -> list[CdfSeries]:
    """The TTFT CDF of each level that has per-request TTFTs."""
    return [
        {"label": level["name"], "points": [(x, f) for x, f in level["ttft_cdf"]]}
        for level in report.levels
        if level.get("ttft_cdf")
    ]
