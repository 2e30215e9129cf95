"""Reading load-test evidence: is it current, and what does it say against the SLOs.

Release gates call `current_reports(revision)` (stale evidence is not
accepted) and `evidence_status(report)`; pages call `slo_matrix(service)` and
the chart-data helpers at the bottom, whose results go to `ledger.charts`.
Nothing here writes.

Goodput is the share of a level's requests that met the service's SLOs:
no error, TTFT ≤ the p95 TTFT SLO and TPOT ≤ the TPOT SLO. SLOs change after a
report is imported, so goodput must be recomputable. The report keeps the
goodput computed at import together with the SLO values it used
(`goodput_slo`), and the per-request TTFT, TPOT and error flags in
`LoadTestRequestData` (float32, compressed: under 1 MB for 100,000 requests).
When the service's SLOs still equal `goodput_slo` the stored number is used;
otherwise it is recomputed from those arrays, one query for any number of
reports. Re-reading the raw file instead would mean downloading and parsing
up to 200 MB from object storage on a page view; keeping a histogram would
make goodput approximate. Both goodputs come from the same float32 arrays and
the same function, so a stored and a recomputed value never disagree.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any, Literal, NamedTuple, TypedDict

import numpy as np
from django.conf import settings
from django.db.models import Q, Subquery
from django.utils import timezone

from ledger.charts import CdfSeries, LatencyPoint, LevelPoint, Slo
from ledger.models import LoadTestReport, LoadTestRequestData, Revision, Service

# The TTFT and TPOT SLOs are p95 SLOs: 95 % of requests are meant to meet them,
# so 95 % is the least goodput that attains them. (A request must meet both at
# once, which is stricter than each p95 alone: goodput breaches first.)
GOODPUT_TARGET = 0.95

StatusWord = Literal["current", "stale"]
Attainment = Literal["met", "breached", "no SLO", "no evidence", "stale"]


# ---------------------------------------------------------------- staleness


class EvidenceStatus(NamedTuple):
    status: StatusWord
    reason: str


def max_age_days(tier: str) -> int:
    """How old a report of a service of this tier may be (settings.EVIDENCE_MAX_AGE_DAYS)."""
    limits = settings.EVIDENCE_MAX_AGE_DAYS
    return limits.get(tier, min(limits.values()))


def evidence_status(report: LoadTestReport, *, now: dt.datetime | None = None) -> EvidenceStatus:
    """("current", "") or ("stale", why), the reasons joined with "; ".

    A report is bound to what it measured: the revision's fingerprint, the
    hardware (GPU model and count) and its age. Reads report.revision, its
    service and runtime: fetch reports with `LoadTestReport.objects.with_context()`.
    """
    now = now or timezone.now()
    revision = report.revision
    reasons = []
    limit = max_age_days(revision.service.tier)
    age = now - report.measured_at
    if age > dt.timedelta(days=limit):
        reasons.append(
            f"measured {report.measured_at:%Y-%m-%d}, {age.days} days ago; "
            f"{revision.service.tier} services accept evidence up to {limit} days old"
        )
    if report.fingerprint != revision.fingerprint:
        reasons.append(
            f"it measured fingerprint {_short(report.fingerprint)}; {revision.label} is now "
            f"{_short(revision.fingerprint)}"
        )
    runtime = revision.runtime
    measured = (report.hardware.get("gpu_model") or "", report.hardware.get("gpu_count"))
    now_runs = (runtime.gpu_model or "", runtime.gpu_count)
    if measured[0].lower() != now_runs[0].lower() or measured[1] != now_runs[1]:
        reasons.append(
            f"it ran on {_hardware_label(*measured)}; {revision.label} runs on "
            f"{_hardware_label(*now_runs)}"
        )
    if reasons:
        return EvidenceStatus("stale", "; ".join(reasons))
    return EvidenceStatus("current", "")


def _short(fingerprint: str) -> str:
    return fingerprint.removeprefix("sha256:")[:12]


def _hardware_label(gpu_model: str, gpu_count: int | None) -> str:
    return f"{gpu_count if gpu_count is not None else '?'} x {gpu_model or 'unnamed GPU'}"


def current_reports(
    revision: Revision, *, workload: str | None = None, now: dt.datetime | None = None
) -> list[LoadTestReport]:
    """The revision's reports that are current, newest first (one query)."""
    reports = LoadTestReport.objects.with_context().filter(revision=revision)
    if workload is not None:
        reports = reports.filter(workload=workload)
    now = now or timezone.now()
    return [r for r in reports if evidence_status(r, now=now).status == "current"]


def newest_by_workload(reports: Iterable[LoadTestReport]) -> dict[str, LoadTestReport]:
    """The newest report of each workload class, in the order of the classes."""
    newest: dict[str, LoadTestReport] = {}
    for report in reports:
        held = newest.get(report.workload)
        if held is None or (report.measured_at, report.pk) > (held.measured_at, held.pk):
            newest[report.workload] = report
    order = list(LoadTestReport.Workload.values)
    return dict(sorted(newest.items(), key=lambda item: order.index(item[0])))


# ---------------------------------------------------------------- SLOs and goodput


def service_slo(service: Service) -> Slo:
    def num(value: Any) -> float | None:
        return None if value is None else float(value)

    return {
        "ttft_p95_ms": num(service.slo_ttft_p95_ms),
        "ttft_p99_ms": num(service.slo_ttft_p99_ms),
        "tpot_ms": num(service.slo_tpot_ms),
        "error_rate_pct": num(service.slo_error_rate_pct),
    }


def goodput_slo(service: Service) -> dict[str, float | None]:
    """The SLO values goodput depends on, as stored with a report."""
    slo = service_slo(service)
    return {"ttft_ms": slo["ttft_p95_ms"], "tpot_ms": slo["tpot_ms"]}


class GoodputResult(NamedTuple):
    value: float | None
    reason: str


def goodput_of(
    *,
    error: np.ndarray,
    ttft: np.ndarray | None,
    tpot: np.ndarray | None,
    ttft_ms: float | None,
    tpot_ms: float | None,
) -> GoodputResult:
    """Share of requests that met the SLOs; errors are misses.

    A request with no TTFT is a miss; one with no TPOT (a single output token)
    cannot miss the TPOT SLO. An SLO that is not set is not checked.
    """
    if ttft_ms is None and tpot_ms is None:
        return GoodputResult(None, "the service has no TTFT or TPOT SLO")
    if ttft_ms is not None and ttft is None:
        return GoodputResult(None, "the file has no per-request TTFT")
    if tpot_ms is not None and tpot is None:
        return GoodputResult(None, "the file has no per-request TPOT")
    if not len(error):
        return GoodputResult(None, "no requests")
    good = ~np.asarray(error, dtype=bool)
    if ttft_ms is not None:
        good &= np.asarray(ttft) <= ttft_ms
    if tpot_ms is not None:
        tpot = np.asarray(tpot)
        good &= np.isnan(tpot) | (tpot <= tpot_ms)
    return GoodputResult(float(np.count_nonzero(good) / len(good)), "")


def level_goodputs(
    levels: Sequence[dict[str, np.ndarray | None]], slo: dict[str, float | None]
) -> list[GoodputResult]:
    """Goodput of each level of `LoadTestRequestData.levels()` against `goodput_slo` values."""
    return [
        goodput_of(
            error=level["error"],
            ttft=level["ttft"],
            tpot=level["tpot"],
            ttft_ms=slo.get("ttft_ms"),
            tpot_ms=slo.get("tpot_ms"),
        )
        for level in levels
    ]


def needs_recompute(report: LoadTestReport, slo: dict[str, float | None]) -> bool:
    """Whether `report_goodput` must read the per-request arrays for these SLO values."""
    if not report.has_request_data or (slo["ttft_ms"] is None and slo["tpot_ms"] is None):
        return False
    return report.goodput_slo != slo


def report_goodput(
    report: LoadTestReport,
    service: Service | None = None,
    *,
    request_data: LoadTestRequestData | None = None,
) -> GoodputResult:
    """Goodput of the report's first level against the service's SLOs of today.

    The stored value when the SLOs are those it was computed against; otherwise
    recomputed from the per-request arrays (`request_data`, or one query).
    """
    service = service or report.revision.service
    slo = goodput_slo(service)
    if not report.has_request_data:
        return GoodputResult(None, "the file has no per-request data")
    if slo["ttft_ms"] is None and slo["tpot_ms"] is None:
        return GoodputResult(None, "the service has no TTFT or TPOT SLO")
    if not needs_recompute(report, slo):
        return GoodputResult(report.goodput, report.goodput_reason)
    return _recompute(report, slo, request_data)


def _recompute(
    report: LoadTestReport, slo: dict[str, float | None], request_data: LoadTestRequestData | None
) -> GoodputResult:
    if request_data is None:
        request_data = LoadTestRequestData.objects.filter(report=report).first()
    if request_data is None:
        return GoodputResult(None, "the file has no per-request data")
    levels = request_data.levels()
    return level_goodputs(levels[:1], slo)[0]


# ---------------------------------------------------------------- capacity


class Capacity(TypedDict):
    """The highest load still within SLO, and what it costs there."""

    axis: Literal["concurrency", "request_rate", "requests_per_s"] | None
    load: float | None
    level: str | None
    output_tokens_per_s: float | None
    gpu_count: int | None
    gpu_hours_per_million_output_tokens: float | None
    levels_within_slo: int
    levels: int
    reason: str


def level_within_slo(level: dict[str, Any], slo: Slo) -> tuple[bool, list[str]]:
    """Whether one level (a `to_json()` level) is within every SLO that is set, and why not."""
    latency = level.get("latency_ms", {})
    checks = [
        ("p95 TTFT", (latency.get("ttft") or {}).get("p95"), slo["ttft_p95_ms"], "ms"),
        ("p95 TPOT", (latency.get("tpot") or {}).get("p95"), slo["tpot_ms"], "ms"),
        (
            "error rate",
            _pct(level.get("conditions", {}).get("error_rate")),
            slo["error_rate_pct"],
            "%",
        ),
    ]
    misses = []
    for name, value, bound, unit in checks:
        if bound is None:
            continue
        if value is None:
            misses.append(f"{name} not measured")
        elif value > bound:
            misses.append(f"{name} {value:.4g} {unit} > {bound:g} {unit}")
    return not misses, misses


def _pct(fraction: float | None) -> float | None:
    return None if fraction is None else fraction * 100.0


def load_axis(levels: Sequence[dict[str, Any]]) -> str:
    """What a sweep varied: the request rate if every level has one, else concurrency,
    else the achieved requests/s."""
    conditions = [lv.get("conditions", {}) for lv in levels]
    if all(c.get("request_rate") is not None for c in conditions):
        return "request_rate"
    if all(c.get("concurrency") is not None for c in conditions):
        return "concurrency"
    return "requests_per_s"


def load_of(level: dict[str, Any], axis: str) -> float | None:
    if axis == "requests_per_s":
        return (level.get("throughput") or {}).get("requests_per_s")
    return level.get("conditions", {}).get(axis)


def gpu_hours_per_million(gpu_count: int | None, output_tokens_per_s: float | None) -> float | None:
    """gpu_count / (output tokens/s * 3600) * 1e6."""
    if not gpu_count or not output_tokens_per_s:
        return None
    return gpu_count / (output_tokens_per_s * 3600.0) * 1e6


def capacity_from_levels(
    levels: Sequence[dict[str, Any]], slo: Slo, gpu_count: int | None
) -> Capacity:
    """Walk the levels from the lightest load up; the capacity is the last one
    within SLO before the first that is not (a later level that happens to pass
    after a breach is noise, not headroom)."""
    out: Capacity = {
        "axis": None,
        "load": None,
        "level": None,
        "output_tokens_per_s": None,
        "gpu_count": gpu_count,
        "gpu_hours_per_million_output_tokens": None,
        "levels_within_slo": 0,
        "levels": len(levels),
        "reason": "",
    }
    if all(slo[k] is None for k in ("ttft_p95_ms", "tpot_ms", "error_rate_pct")):
        out["reason"] = "the service has no p95 TTFT, TPOT or error-rate SLO"
        return out
    axis = load_axis(levels)
    out["axis"] = axis  # type: ignore[typeddict-item]
    measured = sorted(
        (lv for lv in levels if load_of(lv, axis) is not None), key=lambda lv: load_of(lv, axis)
    )
    if not measured:
        out["reason"] = "no level says its load"
        return out
    best = None
    for level in measured:
        ok, misses = level_within_slo(level, slo)
        if not ok:
            if best is None:
                out["reason"] = f"the lightest load, {level['name']}, is already out of SLO: " + (
                    "; ".join(misses)
                )
            break
        best = level
    out["levels_within_slo"] = sum(1 for lv in levels if level_within_slo(lv, slo)[0])
    if best is None:
        return out
    otps = (best.get("throughput") or {}).get("output_tokens_per_s")
    out.update(
        load=load_of(best, axis),
        level=best["name"],
        output_tokens_per_s=otps,
        gpu_hours_per_million_output_tokens=gpu_hours_per_million(gpu_count, otps),
    )
    return out


def report_capacity(report: LoadTestReport, service: Service | None = None) -> Capacity:
    service = service or report.revision.service
    return capacity_from_levels(
        report.levels, service_slo(service), report.hardware.get("gpu_count")
    )


# ---------------------------------------------------------------- the SLO matrix


class MatrixColumn(TypedDict):
    key: str
    label: str
    unit: str
    bound: Literal["max", "min"]


class MatrixCell(TypedDict):
    metric: str
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
]


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
                    _cell(col["key"], None, None, "no evidence", "no report")
                    for col in MATRIX_COLUMNS
                ]
                rows.append(
                    {
                        "workload": workload,
                        "workload_label": label,
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
                    "workload_label": label,
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
        if held is None or (held[1].status == "stale" and status.status == "current"):
            chosen[key] = (report, status)
    return chosen


def _cell(
    metric: str, value: float | None, bound: float | None, word: Attainment, note: str = ""
) -> MatrixCell:
    return {"metric": metric, "value": value, "slo": bound, "word": word, "note": note}


def _cells(
    report: LoadTestReport, status: EvidenceStatus, slo: Slo, good: GoodputResult
) -> list[MatrixCell]:
    has_latency_slo = slo["ttft_p95_ms"] is not None or slo["tpot_ms"] is not None
    values = {
        "ttft_p95": (report.ttft_p95_ms, slo["ttft_p95_ms"], ""),
        "ttft_p99": (report.ttft_p99_ms, slo["ttft_p99_ms"], ""),
        "tpot_p95": (report.tpot_p95_ms, slo["tpot_ms"], ""),
        "error_rate": (_pct(report.error_rate), slo["error_rate_pct"], ""),
        "goodput": (
            _pct(good.value),
            GOODPUT_TARGET * 100 if has_latency_slo else None,
            good.reason,
        ),
    }
    cells = []
    for column in MATRIX_COLUMNS:
        value, bound, note = values[column["key"]]
        if status.status == "stale":
            word: Attainment = "stale"
            note = status.reason
        elif bound is None:
            word = "no SLO"
        elif value is None:
            word = "no evidence"
            note = note or "not in the report"
        elif column["bound"] == "max":
            word = "met" if value <= bound else "breached"
        else:
            word = "met" if value >= bound else "breached"
        cells.append(_cell(column["key"], value, bound, word, note))
    return cells


# ---------------------------------------------------------------- chart data


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
        has_slo = any(slo[k] is not None for k in ("ttft_p95_ms", "tpot_ms", "error_rate_pct"))
        points.append(
            {
                "name": level["name"],
                "load": load_of(level, axis),
                "load_axis": axis,
                "output_tokens_per_s": (level.get("throughput") or {}).get("output_tokens_per_s"),
                "ttft_p95_ms": (latency.get("ttft") or {}).get("p95"),
                "tpot_p95_ms": (latency.get("tpot") or {}).get("p95"),
                "error_rate_pct": _pct(level.get("conditions", {}).get("error_rate")),
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
