"""The SLO matrix of a service: workload classes by metrics, live and candidate."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal, TypedDict, cast

from django.db.models import Q, Subquery
from django.utils import timezone
from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _

from ledger.charts import LatencyPoint, Slo, comparison_rows
from ledger.models import LoadTestReport, LoadTestRequestData, Revision, Service
from ledger.queries.capacity import pct
from ledger.queries.goodput import (
    GOODPUT_TARGET,
    GoodputResult,
    goodput_slo,
    needs_recompute,
    report_goodput,
    service_slo,
)
from ledger.queries.slo_attainment import SLO_CHECKS, attained
from ledger.queries.staleness import EvidenceStatus, evidence_status

Attainment = Literal["met", "breached", "no SLO", "no evidence", "stale", "mismatched"]


class MatrixColumn(TypedDict):
    key: str
    label: str | Promise
    unit: str
    bound: Literal["max", "min"]


class MatrixCell(TypedDict):
    metric: str
    unit: str
    bound: Literal["max", "min"]
    value: float | None
    slo: float | None
    word: Attainment
    note: str


class MatrixRow(TypedDict):
    workload: str
    workload_label: str
    report: LoadTestReport | None
    status: EvidenceStatus | None
    cells: list[MatrixCell]


class MatrixRevision(TypedDict):
    role: Literal["live", "candidate"]
    revision: Revision
    rows: list[MatrixRow]


class SloMatrix(TypedDict):
    service: Service
    slo: Slo
    columns: list[MatrixColumn]
    revisions: list[MatrixRevision]


MATRIX_COLUMNS: list[MatrixColumn] = [
    {"key": "ttft_p95", "label": "p95 TTFT", "unit": "ms", "bound": "max"},
    {"key": "ttft_p99", "label": "p99 TTFT", "unit": "ms", "bound": "max"},
    {"key": "tpot_p95", "label": "p95 TPOT", "unit": "ms", "bound": "max"},
    {"key": "error_rate", "label": "Error rate", "unit": "%", "bound": "max"},
    {"key": "goodput", "label": "Goodput", "unit": "%", "bound": "min"},
    # No SLO bounds these (yet): shown so that a missing measurement is seen.
    {"key": "gpu_memory_peak", "label": _("Peak GPU memory"), "unit": "GiB", "bound": "max"},
    {"key": "kv_cache_peak", "label": _("Peak KV cache"), "unit": "%", "bound": "max"},
    # Table 6-2's performance boundary (ledger.queries.SLO_CHECKS).
    {"key": "throughput", "label": _("Output throughput"), "unit": "tokens/s", "bound": "min"},
    {"key": "concurrency", "label": _("Concurrency"), "unit": "requests", "bound": "min"},
    {"key": "timeout_rate", "label": _("Timeout rate"), "unit": "%", "bound": "max"},
]


def has_peaks(report: LoadTestReport) -> bool:
    """Whether the report carries both peaks, GPU memory and KV-cache use."""
    return report.gpu_memory_peak_gib is not None and report.kv_cache_peak_pct is not None


def slo_matrix(service: Service, *, now: dt.datetime | None = None) -> SloMatrix:
    """Workload classes by metrics for the live revision and the candidate.

    The candidate is the newest revision newer than the live one (with no live
    revision, the newest). Each row shows the newest current report of its
    workload class, or, when there is none, the newest stale one (word
    "stale"). Three queries at most: revisions, reports, and the per-request
    arrays of reports whose goodput must be recomputed for changed SLOs.
    """
    now = now or timezone.now()
    slo = service_slo(service)
    live_id = service.live_revision_id
    newer = Revision.objects.filter(service=service)
    if live_id is not None:
        newer = newer.filter(number__gt=Revision.objects.filter(pk=live_id).values("number")[:1])
    candidate_ids = newer.order_by("-number").values("pk")[:1]
    revisions = list(
        Revision.objects.filter(service=service)
        .filter(Q(pk=live_id) | Q(pk__in=Subquery(candidate_ids)))
        .select_related("runtime")
    )
    for revision in revisions:
        revision.service = service
    by_id = {revision.pk: revision for revision in revisions}
    reports = list(LoadTestReport.objects.filter(revision__in=by_id).defer("results"))
    for report in reports:
        report.revision = by_id[report.revision_id]
    chosen = _choose_reports(reports, now)

    wanted = goodput_slo(service)
    recompute = [report.pk for report, _ in chosen.values() if needs_recompute(report, wanted)]
    arrays = (
        {d.report_id: d for d in LoadTestRequestData.objects.filter(report__in=recompute)}
        if recompute
        else {}
    )

    blocks: list[MatrixRevision] = []
    ordered = sorted(revisions, key=lambda r: r.pk != live_id)
    for revision in ordered:
        rows: list[MatrixRow] = []
        for workload, label in LoadTestReport.Workload.choices:
            picked = chosen.get((revision.pk, workload))
            if picked is None:
                cells = [
                    _cell(col, None, None, "no evidence", "no report") for col in MATRIX_COLUMNS
                ]
                rows.append(
                    {
                        "workload": workload,
                        "workload_label": str(label),
                        "report": None,
                        "status": None,
                        "cells": cells,
                    }
                )
                continue
            report, status = picked
            good = report_goodput(report, service, request_data=arrays.get(report.pk))
            rows.append(
                {
                    "workload": workload,
                    "workload_label": str(label),
                    "report": report,
                    "status": status,
                    "cells": _cells(report, status, slo, good),
                }
            )
        blocks.append(
            {
                "role": "live" if revision.pk == live_id else "candidate",
                "revision": revision,
                "rows": rows,
            }
        )
    return {"service": service, "slo": slo, "columns": MATRIX_COLUMNS, "revisions": blocks}


def _choose_reports(
    reports: list[LoadTestReport], now: dt.datetime
) -> dict[tuple[int, str], tuple[LoadTestReport, EvidenceStatus]]:
    chosen: dict[tuple[int, str], tuple[LoadTestReport, EvidenceStatus]] = {}
    newest_first = sorted(reports, key=lambda r: (r.measured_at, r.pk), reverse=True)
    for report in newest_first:
        key = (report.revision_id, report.workload)
        status = evidence_status(report, now=now)
        held = chosen.get(key)
        if held is None or (not held[1].counts and status.counts):
            chosen[key] = (report, status)
    return chosen


def _cell(
    column: MatrixColumn, value: float | None, slo: float | None, word: Attainment, note: str = ""
) -> MatrixCell:
    return {
        "metric": column["key"],
        "unit": column["unit"],
        "bound": column["bound"],
        "value": value,
        "slo": slo,
        "word": word,
        "note": note,
    }


_PEAK_COLUMNS = ("gpu_memory_peak", "kv_cache_peak")


def _cells(
    report: LoadTestReport, status: EvidenceStatus, slo: Slo, good: GoodputResult
) -> list[MatrixCell]:
    has_latency_slo = slo["ttft_p95_ms"] is not None or slo["tpot_ms"] is not None
    values: dict[str, tuple[float | None, float | None, str]] = {
        check.key: (check.measured(report), check.target(slo), check.unmeasured)
        for check in SLO_CHECKS
    }
    values |= {
        "goodput": (
            pct(good.value),
            GOODPUT_TARGET * 100 if has_latency_slo else None,
            good.reason,
        ),
        "gpu_memory_peak": (report.gpu_memory_peak_gib, None, ""),
        "kv_cache_peak": (report.kv_cache_peak_pct, None, ""),
    }
    cells = []
    for column in MATRIX_COLUMNS:
        value, bound, note = values[column["key"]]
        if status.status in ("stale", "mismatched"):
            # The numbers are shown, but they do not count. (An unverified report's
            # numbers are judged: its row says it is unverified.)
            word: Attainment = cast("Attainment", status.status)
            note = status.reason
        elif column["key"] in _PEAK_COLUMNS and value is None:
            word = "no evidence"
            note = "not measured"
        elif bound is None:
            word = "no SLO"
        elif value is None:
            word = "no evidence"
            note = note or "not in the report"
        else:
            word = "met" if attained(column["bound"], value, bound) else "breached"
        cells.append(_cell(column, value, bound, word, note))
    return cells


# ---------------------------------------------------------------- live against candidate


class Comparison(TypedDict):
    live: Revision
    candidate: Revision
    live_points: list[LatencyPoint]
    candidate_points: list[LatencyPoint]
    # `ledger.charts.comparison_rows`, each with live_status, candidate_status and
    # change ("slower", "faster" or "").
    rows: list[dict[str, Any]]


def _column_point(row: MatrixRow, label: str) -> LatencyPoint:
    """A chart point from the report's columns (the matrix does not load the levels)."""
    report = row["report"]
    assert report is not None and row["status"] is not None
    return {
        "workload": row["workload"],
        "label": label,
        "ttft_p50_ms": None,
        "ttft_p95_ms": report.ttft_p95_ms,
        "ttft_p99_ms": report.ttft_p99_ms,
        "tpot_p50_ms": None,
        "tpot_p95_ms": report.tpot_p95_ms,
        "tpot_p99_ms": None,
        "status": row["status"].status,
    }


def live_vs_candidate(matrix: SloMatrix) -> Comparison | None:
    """Candidate against live per workload class, from the reports the matrix shows.

    None when the service has no live revision or no candidate, or neither has a report.
    """
    blocks = {block["role"]: block for block in matrix["revisions"]}
    live, candidate = blocks.get("live"), blocks.get("candidate")
    if live is None or candidate is None:
        return None
    pairs = [
        (old, new)
        for old, new in zip(live["rows"], candidate["rows"], strict=True)
        if old["report"] is not None or new["report"] is not None
    ]
    if not pairs:
        return None
    live_points, candidate_points = [], []
    statuses: dict[str, dict[str, str]] = {}
    for old, new in pairs:
        words: dict[str, str] = {
            side: row["status"].status if row["status"] else "no evidence"
            for side, row in (("live", old), ("candidate", new))
        }
        statuses[old["workload"]] = words
        label = old["workload_label"]
        if "stale" in words.values():
            label = f"{label} (stale)"
        if old["report"] is not None:
            live_points.append(_column_point(old, label))
        if new["report"] is not None:
            candidate_points.append(_column_point(new, label))
    rows = comparison_rows(live_points, candidate_points)
    for row in rows:
        delta = row["delta"]
        row.update(
            live_status=statuses[row["workload"]]["live"],
            candidate_status=statuses[row["workload"]]["candidate"],
            change="" if delta is None or delta == 0 else "slower" if delta > 0 else "faster",
        )
    return {
        "live": live["revision"],
        "candidate": candidate["revision"],
        "live_points": live_points,
        "candidate_points": candidate_points,
        "rows": rows,
    }
