"""Reading drills: the list and one drill, with what their pages show."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet

from ledger.roles import Role
from releases.drills.plan import peak_rate
from releases.models import Drill


def drill_queryset() -> QuerySet[Drill]:
    return Drill.objects.select_related("created_by", "concluded_by", "revision").prefetch_related(
        "services"
    )


@dataclass(frozen=True)
class TaskRow:
    """One task type of a drill, as its page shows it: the plan, then what was measured."""

    task_type: str
    sample_set: str
    weight_pct: float
    bounds: dict[str, Any]
    measured: dict[str, Any] | None


@dataclass(frozen=True)
class DrillView:
    rows: list[TaskRow]
    stages: list[dict[str, Any]]
    planned_requests: int
    duration_s: int
    peak_rate: float
    signers: list[str]


def _planned(arrival: dict[str, Any]) -> tuple[int, int]:
    """(requests, seconds) the arrival profile plans."""
    if arrival.get("type") == "ramp":
        stages = arrival.get("stages") or []
        seconds = sum(stage["duration_s"] for stage in stages)
        requests, before = 0.0, 0.0
        for stage in stages:
            requests += (before + stage["rate"]) / 2 * stage["duration_s"]
            before = stage["rate"]
        return round(requests), seconds
    seconds = int(arrival.get("duration_s") or 0)
    return round(float(arrival.get("rate") or 0) * seconds), seconds


def drill_view(drill: Drill) -> DrillView:
    total = sum(entry["weight"] for entry in drill.mix) or 1
    measured = (drill.results or {}).get("by_task_type") or {}
    rows = [
        TaskRow(
            task_type=entry["task_type"],
            sample_set=entry.get("sample_set_label") or str(entry["sample_set"]),
            weight_pct=round(100 * entry["weight"] / total, 1),
            bounds=drill.bounds.get(entry["task_type"], {}),
            measured=measured.get(entry["task_type"]),
        )
        for entry in drill.mix
    ]
    requests, seconds = _planned(drill.arrival)
    return DrillView(
        rows=rows,
        stages=list((drill.results or {}).get("stages") or []),
        planned_requests=requests,
        duration_s=seconds,
        peak_rate=peak_rate(drill.arrival),
        signers=[str(Role(role).label) for role in drill.signers],
    )
