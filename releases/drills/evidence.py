"""A drill's run kept as load-test evidence of the revision it ran against.

Each task type of each part (a backend of a revision under test) becomes one report of
its workload class (the mix entry's, else `policy.drill_workload`): its requests written
as a generic per-request file (`ledger.importers.generic`, JSON Lines) and imported like
any upload, so the raw file is kept, the percentiles are computed from it, the model is
checked against the revision, and release gates and the SLO matrix read it as they read
any report. The report's `tool` is "drill" and its origin names the drill, its mix and
its rate.

**What the file says.** One row per planned start of the task type: a request sent has
its TTFT, end to end, output and input tokens and start (seconds after the plan's
start); one that failed has its error code; a start dropped at the in-flight ceiling is
a failed row (`dropped: in-flight ceiling`), as the load was asked for and not carried.
The load level is the task type's planned rate in its stage (the stage's rate times the
task type's share of the weights), so a ramp is one level per stage.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Sequence
from typing import Any

import orjson
from django.core.exceptions import ValidationError
from django.utils import timezone

from ledger.services.evidence import import_loadtest_report
from releases import policy
from releases.models import Drill
from replay.openloop.summary import RequestRecord

logger = logging.getLogger(__name__)

TOOL = "drill"
DROPPED = "dropped: in-flight ceiling"


def workload_of(drill: Drill, task_type: str) -> str:
    for entry in drill.mix:
        if entry["task_type"] == task_type and entry.get("workload"):
            return entry["workload"]
    return policy.drill_workload(task_type)


def _stage_rates(arrival: dict[str, Any]) -> list[float]:
    if arrival["type"] == "ramp":
        return [float(stage["rate"]) for stage in arrival["stages"]]
    return [float(arrival["rate"])]


def _shares(drill: Drill) -> dict[str, float]:
    total = sum(entry["weight"] for entry in drill.mix) or 1.0
    return {entry["task_type"]: entry["weight"] / total for entry in drill.mix}


def request_rows(
    records: Sequence[RequestRecord], *, model: str, stage_rates: Sequence[float], share: float
) -> bytes:
    """The task type's records as generic-format JSON Lines (see the module's docstring)."""
    lines = []
    for record in sorted(records, key=lambda r: r.index):
        rate = round(stage_rates[record.stage] * share, 4)
        row: dict[str, Any] = {"model": model, "request_rate": rate}
        if record.start == "dropped":
            row.update(error=DROPPED, start_s=round(record.planned_ms / 1000, 4))
        elif record.outcome != "ok":
            row.update(error=record.outcome or "error", start_s=_seconds(record.started_ms))
        else:
            row.update(
                ttft_ms=record.ttft_ms,
                e2e_ms=record.e2e_ms,
                tpot_ms=record.tpot_ms,
                # replay.client counts chunks when the server sends no usage: None only
                # for an answer without a token.
                output_tokens=record.output_tokens or 0,
                input_tokens=record.input_tokens,
                start_s=_seconds(record.started_ms),
            )
        lines.append(orjson.dumps(row))
    return b"\n".join(lines) + b"\n"


def _seconds(ms: float | None) -> float | None:
    return None if ms is None else round(ms / 1000, 4)


def record_drill_evidence(
    drill: Drill, parts: Sequence[Any], records_by_part: Sequence[Sequence[RequestRecord]]
) -> list[dict[str, Any]]:
    """Import each part's task types as reports; what was stored, or why not, per task type.

    Imported by the system (the drill's run is the platform's act, the revision's team
    did not upload it); each import is its own transaction and Event
    (`loadtest_report.imported` with the drill as origin). A file refused (the backend
    serves another model than the revision, say) is reported, not raised: the run's
    figures stand either way.
    """
    shares = _shares(drill)
    rates = _stage_rates(drill.arrival)
    measured_at = timezone.now()
    stored: list[dict[str, Any]] = []
    for part, records in zip(parts, records_by_part, strict=True):
        for task_type in part.task_types:
            mine = [r for r in records if r.task_type == task_type]
            if not mine:
                continue
            workload = workload_of(drill, task_type)
            filename = f"drill-{drill.pk}-{part.service.slug}-{task_type}.jsonl"
            entry: dict[str, Any] = {
                "service": part.service.slug,
                "revision": part.revision.label,
                "revision_number": part.revision.number,
                "task_type": task_type,
                "workload": workload,
            }
            body = request_rows(
                mine, model=part.backend.model_name, stage_rates=rates, share=shares[task_type]
            )
            try:
                report, _created = import_loadtest_report(
                    part.revision,
                    actor=None,
                    workload=workload,
                    file=io.BytesIO(body),
                    filename=filename,
                    format="generic",
                    measured_at=measured_at,
                    tool=TOOL,
                    origin={
                        "kind": "drill",
                        "id": drill.pk,
                        "name": drill.name,
                        "task_type": task_type,
                        "share_pct": round(100 * shares[task_type], 1),
                        "arrival": drill.arrival,
                        "seed": drill.seed,
                    },
                )
            except ValidationError as error:
                entry["refused"] = "; ".join(
                    f"{field}: {' '.join(messages)}"
                    for field, messages in error.message_dict.items()
                )
                logger.warning("drill %s: %s not stored: %s", drill.pk, filename, entry["refused"])
            else:
                entry["report"] = report.pk
            stored.append(entry)
    return stored
