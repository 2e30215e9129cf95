"""Goodput: the share of a level's requests within the SLOs, kept recomputable.

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

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from ledger.charts import Slo
from ledger.models import LoadTestReport, LoadTestRequestData, RequestLevel, Service

# The TTFT and TPOT SLOs are p95 SLOs: 95 % of requests are meant to meet them,
# so 95 % is the least goodput that attains them. (A request must meet both at
# once, which is stricter than each p95 alone: goodput breaches first.)
GOODPUT_TARGET = 0.95


def service_slo(service: Service) -> Slo:
    def num(value: Any) -> float | None:
        return None if value is None else float(value)

    return {
        "ttft_p95_ms": num(service.slo_ttft_p95_ms),
        "ttft_p99_ms": num(service.slo_ttft_p99_ms),
        "tpot_ms": num(service.slo_tpot_ms),
        "error_rate_pct": num(service.slo_error_rate_pct),
        "min_output_tokens_per_s": num(service.slo_min_output_tokens_per_s),
        "min_concurrency": num(service.slo_min_concurrency),
        "timeout_rate_pct": num(service.slo_timeout_rate_pct),
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
    levels: Sequence[RequestLevel], slo: dict[str, float | None]
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
