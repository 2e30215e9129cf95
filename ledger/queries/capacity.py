"""Capacity: the highest load of a sweep still within every SLO, and its cost."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, TypedDict

from ledger.charts import Slo
from ledger.models import LoadTestReport, Service
from ledger.queries.goodput import service_slo

LoadAxis = Literal["concurrency", "request_rate", "requests_per_s"]


class Capacity(TypedDict):
    """The highest load still within SLO, and what it costs there."""

    axis: LoadAxis | None
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
            pct(level.get("conditions", {}).get("error_rate")),
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


def pct(fraction: float | None) -> float | None:
    return None if fraction is None else fraction * 100.0


def load_axis(levels: Sequence[dict[str, Any]]) -> LoadAxis:
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
    if slo["ttft_p95_ms"] is None and slo["tpot_ms"] is None and slo["error_rate_pct"] is None:
        out["reason"] = "the service has no p95 TTFT, TPOT or error-rate SLO"
        return out
    axis = load_axis(levels)
    out["axis"] = axis
    loaded = [(load, lv) for lv in levels if (load := load_of(lv, axis)) is not None]
    measured = [lv for _, lv in sorted(loaded, key=lambda pair: pair[0])]
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
    out["load"] = load_of(best, axis)
    out["level"] = best["name"]
    out["output_tokens_per_s"] = otps
    out["gpu_hours_per_million_output_tokens"] = gpu_hours_per_million(gpu_count, otps)
    return out


def report_capacity(report: LoadTestReport, service: Service | None = None) -> Capacity:
    service = service or report.revision.service
    return capacity_from_levels(
        report.levels, service_slo(service), report.hardware.get("gpu_count")
    )
