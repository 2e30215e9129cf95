"""Daily run evidence: record one service's day, from the gateway or from a scrape.

`clean_run_summary` checks every field and names it in the message (rates are
fractions from 0 to 1, percentiles do not decrease from p50 to p99, counts are
whole and not negative, the day is not in the future). `record_run_summary`
writes the row and its Event in one transaction under the service's row lock,
so two pushes of the same day, at the same moment, are applied one after the
other. The same day again replaces the row and the Event says `replaced`, with
what it replaced; the same numbers again record nothing.

A gateway day may carry its breakdown: one row per tenant, task type and
backend (`clean_breakdown`), whose sums must be the day's totals (a total left
out is taken from them). The rows are replaced with the day, in its
transaction; its Event records their digest and count, not the rows.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import itertools
import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.utils import timezone

from ledger import permissions
from ledger.chain import append_event, canonical_json, subject_of
from ledger.metrics_import import EngineMetrics, Scrape, summarize
from ledger.models import Event, Revision, RunBreakdown, RunSummary, Service
from ledger.models.run_evidence import (
    BREAKDOWN_COUNT_FIELDS,
    BREAKDOWN_LATENCY_FIELDS,
    COUNT_FIELDS,
    LATENCY_FIELDS,
    LATENCY_METRICS,
    PERCENTILES,
    RATE_FIELDS,
    RUN_SUMMARY_FIELDS,
    TOKEN_FIELDS,
    UNATTRIBUTED,
)
from lib.actors import Actor

__all__ = [
    "RUN_SUMMARY_FIELDS",
    "breakdown_sha256",
    "clean_breakdown",
    "clean_run_summary",
    "record_run_summary",
    "record_scraped_day",
    "recorded_values",
]

Outcome = Literal["recorded", "replaced", "unchanged"]

# Every column the Event records (error_rate is computed from error_counts).
_RECORDED = ("revision", *RUN_SUMMARY_FIELDS, "error_rate")
_MAX_KEYS = 200
_NO_BREAKDOWN = {"breakdown_sha256": None, "breakdown_rows": 0}
# Rows per INSERT where there is no COPY (SQLite): a 10,000-row day in a few statements.
_BREAKDOWN_BATCH = 2000
_MAX_KEY_LENGTH = 80
# Far above any day of any service, and within what a bigint column holds.
MAX_COUNT = 10**15


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _count(name: str, value: Any, errors: dict[str, str]) -> int | None:
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        errors[name] = f"{name} must be a whole number of requests (0 or more); got {value!r}."
        return None
    if value < 0:
        errors[name] = f"{name} must not be negative; got {value}."
        return None
    if value > MAX_COUNT:
        errors[name] = f"{name} is {value}, more than any day holds (at most {MAX_COUNT:.0e})."
        return None
    return value


def _fraction(name: str, value: Any, errors: dict[str, str]) -> float | None:
    if value is None:
        return None
    if not _is_number(value) or not math.isfinite(value):
        errors[name] = f"{name} must be a number from 0 to 1 (a fraction); got {value!r}."
        return None
    if not 0 <= value <= 1:
        errors[name] = f"{name} must be from 0 to 1 (a fraction: 0.02 is 2 %); got {value:g}."
        return None
    return float(value)


def _latency(name: str, value: Any, errors: dict[str, str]) -> float | None:
    if value is None:
        return None
    if not _is_number(value) or not math.isfinite(value) or value < 0:
        errors[name] = f"{name} must be a number of milliseconds, 0 or more; got {value!r}."
        return None
    return float(value)


def _counts_by_key(name: str, value: Any, what: str, errors: dict[str, str]) -> dict[str, int]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        errors[name] = f'{name} must be an object of {what} to request counts, e.g. {{"503": 12}}.'
        return {}
    if len(value) > _MAX_KEYS:
        errors[name] = f"{name} has {len(value)} entries; at most {_MAX_KEYS} are kept."
        return {}
    cleaned: dict[str, int] = {}
    for key, count in value.items():
        if not isinstance(key, str) or not key.strip() or len(key) > _MAX_KEY_LENGTH:
            errors[name] = (
                f"{name}: each {what} is a name of 1 to {_MAX_KEY_LENGTH} characters; got {key!r}."
            )
            return {}
        if isinstance(count, float) and count.is_integer():
            count = int(count)
        if not isinstance(count, int) or isinstance(count, bool) or not 0 <= count <= MAX_COUNT:
            errors[name] = f"{name}[{key!r}] must be a whole number, 0 or more; got {count!r}."
            return {}
        cleaned[key.strip()] = count
    return cleaned


def _check_date(value: Any, errors: dict[str, str]) -> dt.date | None:
    if isinstance(value, dt.datetime) or not isinstance(value, dt.date):
        errors["date"] = f"date must be a day, YYYY-MM-DD; got {value!r}."
        return None
    today = timezone.now().astimezone(dt.UTC).date()
    if value > today:
        errors["date"] = (
            f"date {value.isoformat()} is in the future (today is {today.isoformat()}, UTC)."
        )
        return None
    return value


def clean_run_summary(
    fields: Mapping[str, Any], *, date: Any, source: str, require_requests: bool
) -> dict[str, Any]:
    """The fields checked and normalised, with error_rate computed; ValidationError naming
    every field that is wrong (all of them at once, not the first only)."""
    errors: dict[str, str] = {}
    cleaned = _clean_fields(
        fields, date=date, source=source, require_requests=require_requests, errors=errors
    )
    if errors:
        raise ValidationError(errors)
    return cleaned


def _check_percentile_order(
    cleaned: Mapping[str, Any],
    metrics: Sequence[str],
    errors: dict[str, str],
    prefix: str = "",
) -> None:
    for metric in metrics:
        names = [f"{metric}_{p}_ms" for p in PERCENTILES]
        given = [(n, cleaned[n]) for n in names if cleaned[n] is not None]
        for (low_name, low), (high_name, high) in itertools.pairwise(given):
            if high < low and f"{prefix}{high_name}" not in errors:
                errors[f"{prefix}{high_name}"] = (
                    f"{prefix}{high_name} ({high:g}) is below {prefix}{low_name} ({low:g}): "
                    "percentiles must not decrease (p50 ≤ p95 ≤ p99)."
                )


def _clean_fields(
    fields: Mapping[str, Any],
    *,
    date: Any,
    source: str,
    require_requests: bool,
    errors: dict[str, str],
) -> dict[str, Any]:
    unknown = sorted(set(fields) - set(RUN_SUMMARY_FIELDS))
    for name in unknown:
        errors[name] = f"{name} is not a run-summary field."
    if source not in RunSummary.Source.values:
        errors["source"] = (
            f"source must be one of {', '.join(RunSummary.Source.values)}; got {source!r}."
        )
    _check_date(date, errors)
    cleaned: dict[str, Any] = {}
    cleaned["requests"] = _count("requests", fields.get("requests"), errors)
    if require_requests and fields.get("requests") is None and "requests" not in errors:
        errors["requests"] = (
            "requests is required: how many requests the service answered that day."
        )
    for name in LATENCY_FIELDS:
        cleaned[name] = _latency(name, fields.get(name), errors)
    _check_percentile_order(cleaned, LATENCY_METRICS, errors)
    for name in RATE_FIELDS:
        cleaned[name] = _fraction(name, fields.get(name), errors)
    for name in (*TOKEN_FIELDS, *COUNT_FIELDS):
        cleaned[name] = _count(name, fields.get(name), errors)
    cleaned["error_counts"] = _counts_by_key(
        "error_counts", fields.get("error_counts"), "error code", errors
    )
    cleaned["degradations"] = _counts_by_key(
        "degradations", fields.get("degradations"), "degradation policy", errors
    )
    details = fields.get("details") or {}
    if not isinstance(details, Mapping):
        errors["details"] = "details must be an object."
    cleaned["details"] = dict(details) if isinstance(details, Mapping) else {}

    requests = cleaned["requests"]
    failed = sum(cleaned["error_counts"].values())
    cleaned["error_rate"] = None
    if requests is not None and "error_counts" not in errors:
        if failed > requests:
            errors["error_counts"] = (
                f"error_counts add up to {failed} failed requests, more than the {requests} "
                "requests of the day."
            )
        elif requests:
            cleaned["error_rate"] = failed / requests
    if requests is not None and "degradations" not in errors:
        over = {k: v for k, v in cleaned["degradations"].items() if v > requests}
        if over:
            policy, count = next(iter(over.items()))
            errors["degradations"] = (
                f"degradations[{policy!r}] is {count}, more than the {requests} requests of the day."
            )
    return cleaned


# ---------------------------------------------------------------- breakdown rows

BreakdownRow = dict[str, Any]
# A row's identity within its day: one row per tenant, task type and backend.
_ROW_KEY = ("tenant", "task_type", "backend")
_ROW_FIELDS = frozenset(
    {*_ROW_KEY, *BREAKDOWN_COUNT_FIELDS, "error_counts", "degradations", "latency"}
    | set(BREAKDOWN_LATENCY_FIELDS)
)
# The day's totals that are the sums of the rows' counts of the same name.
SUMMED_COUNTS = ("requests", *TOKEN_FIELDS, *COUNT_FIELDS)
SUMMED_BY_KEY = ("error_counts", "degradations")
# A day's rate, and the rows' count it is the fraction of the requests of.
RATE_COUNTS = {
    "rate_4xx": "errors_4xx",
    "rate_5xx": "errors_5xx",
    "refusal_rate": "refusals",
    "structured_output_error_rate": "structured_errors",
    "truncation_rate": "truncations",
}
_STATUS_CLASSES = {"errors_4xx": "4", "errors_5xx": "5"}
_MAX_BACKEND_LENGTH = RunBreakdown._meta.get_field("backend").max_length or 120
# A push whose every row is wrong names the first faults, not 10,000 of them.
_MAX_ROW_ERRORS = 50


# Every column of a row but its id and summary, in the order a clean row holds them.
BREAKDOWN_COLUMNS = (
    *_ROW_KEY,
    *BREAKDOWN_COUNT_FIELDS,
    *SUMMED_BY_KEY,
    *BREAKDOWN_LATENCY_FIELDS,
)


@dataclass(frozen=True)
class CleanBreakdown:
    """A push's breakdown rows, checked, in key order, with what they add up to."""

    rows: list[BreakdownRow]
    sums: dict[str, Any]
    # The counts some row gave (a count no row gave is 0 in each row, not a claim).
    given: frozenset[str]

    @functools.cached_property
    def sha256(self) -> str:
        return breakdown_sha256(self.rows)


def breakdown_sha256(rows: Sequence[BreakdownRow]) -> str:
    """The digest the Event records: sha256 of the canonical JSON of the rows in key order."""
    return hashlib.sha256(canonical_json(list(rows)).encode()).hexdigest()


def _shown(value: Any) -> str:
    """A value as a refusal quotes it: a 1 MB string is not echoed back whole."""
    text = repr(value)
    return text if len(text) <= 100 else f"{text[:100]}…"


def _allowed(path: str, value: Any, allowed: Sequence[str], what: str, errors: dict) -> str:
    choices = ", ".join(allowed) if allowed else "none yet"
    if not isinstance(value, str) or not value.strip():
        errors[path] = (
            f"{path} is required: one of {what} ({choices}), or “{UNATTRIBUTED}” when the "
            f"gateway could not tell; got {_shown(value)}."
        )
        return ""
    value = value.strip()
    if value != UNATTRIBUTED and value not in allowed:
        errors[path] = (
            f"{path} {_shown(value)} is not one of {what} ({choices}); send “{UNATTRIBUTED}” "
            "when the gateway could not tell."
        )
    return value


def _is_status(code: str) -> bool:
    return len(code) == 3 and code.isdigit()


def _status_class_sum(error_counts: Mapping[str, int], first_digit: str) -> int:
    return sum(
        count for code, count in error_counts.items() if _is_status(code) and code[0] == first_digit
    )


def _row_latencies(path: str, row: Mapping[str, Any], errors: dict[str, str]) -> dict[str, Any]:
    latency = row.get("latency")
    if latency is None:
        latency = {}
    if not isinstance(latency, Mapping):
        errors[f"{path}.latency"] = (
            f"{path}.latency must be an object of {', '.join(BREAKDOWN_LATENCY_FIELDS)}."
        )
        latency = {}
    for name in sorted(set(latency) - set(BREAKDOWN_LATENCY_FIELDS)):
        errors[f"{path}.latency.{name}"] = (
            f"{path}.latency.{name} is not a latency field ({', '.join(BREAKDOWN_LATENCY_FIELDS)})."
        )
    cleaned: dict[str, Any] = {}
    for name in BREAKDOWN_LATENCY_FIELDS:
        flat, nested = row.get(name), latency.get(name)
        if flat is not None and nested is not None:
            errors[f"{path}.{name}"] = (
                f"{path}.{name} is given twice, on the row and in its latency: give it once."
            )
        cleaned[name] = _latency(f"{path}.{name}", flat if flat is not None else nested, errors)
    _check_percentile_order(cleaned, ("ttft", "tpot"), errors, prefix=f"{path}.")
    return cleaned


def _clean_row(
    index: int,
    row: Any,
    *,
    tenants: Sequence[str],
    task_types: Sequence[str],
    service: Service,
    errors: dict[str, str],
) -> tuple[BreakdownRow, set[str]] | None:
    """One row checked (its faults added to `errors` under `breakdown[i].field`), and the
    counts it gave."""
    path = f"breakdown[{index}]"
    if not isinstance(row, Mapping):
        errors[path] = f"{path} must be an object (tenant, task_type, backend and counts)."
        return None
    for name in sorted(set(row) - _ROW_FIELDS):
        errors[f"{path}.{name}"] = f"{path}.{name} is not a breakdown field."
    cleaned: BreakdownRow = {
        "tenant": _allowed(
            f"{path}.tenant", row.get("tenant"), tenants, f"{service.slug}'s tenants", errors
        ),
        "task_type": _allowed(
            f"{path}.task_type",
            row.get("task_type"),
            task_types,
            f"{service.slug}'s task types",
            errors,
        ),
    }
    backend = row.get("backend")
    if backend is None:
        backend = ""
    if not isinstance(backend, str) or len(backend.strip()) > _MAX_BACKEND_LENGTH:
        errors[f"{path}.backend"] = (
            f"{path}.backend must be the backend's name, at most {_MAX_BACKEND_LENGTH} "
            f"characters; got {_shown(backend)}."
        )
        backend = ""
    cleaned["backend"] = backend.strip()
    given = {
        name for name in (*BREAKDOWN_COUNT_FIELDS, *SUMMED_BY_KEY) if row.get(name) is not None
    }
    for name in BREAKDOWN_COUNT_FIELDS:
        cleaned[name] = _count(f"{path}.{name}", row.get(name), errors) or 0
    if row.get("requests") is None:
        errors[f"{path}.requests"] = f"{path}.requests is required: the row's requests."
    cleaned["error_counts"] = _counts_by_key(
        f"{path}.error_counts", row.get("error_counts"), "error code", errors
    )
    cleaned["degradations"] = _counts_by_key(
        f"{path}.degradations", row.get("degradations"), "degradation policy", errors
    )
    if row.get("error_counts") is not None:
        # Codes named in words (context_length_exceeded) have no class: then the
        # 4xx count may be more than its numbered codes, never less.
        only_statuses = all(_is_status(code) for code in cleaned["error_counts"])
        for name, digit in _STATUS_CLASSES.items():
            coded = _status_class_sum(cleaned["error_counts"], digit)
            if name not in given:
                cleaned[name] = coded
                given.add(name)
            elif cleaned[name] < coded or (only_statuses and cleaned[name] != coded):
                errors[f"{path}.{name}"] = (
                    f"{path}.{name} is {cleaned[name]} but its error_counts' {digit}xx codes "
                    f"add up to {coded}."
                )
    failed = max(
        cleaned["errors_4xx"] + cleaned["errors_5xx"], sum(cleaned["error_counts"].values())
    )
    if failed > cleaned["requests"] and f"{path}.requests" not in errors:
        errors[f"{path}.requests"] = (
            f"{path} has {failed} failed requests, more than its {cleaned['requests']} requests."
        )
    cleaned.update(_row_latencies(path, row, errors))
    return cleaned, given


def _service_task_types(service: Service) -> list[str]:
    return sorted(service.task_types.values_list("slug", flat=True))


def _breakdown_sums(rows: Sequence[BreakdownRow]) -> dict[str, Any]:
    sums: dict[str, Any] = {name: 0 for name in BREAKDOWN_COUNT_FIELDS}
    by_key: dict[str, Counter[str]] = {name: Counter() for name in SUMMED_BY_KEY}
    for row in rows:
        for name in BREAKDOWN_COUNT_FIELDS:
            sums[name] += row[name]
        for name in SUMMED_BY_KEY:
            by_key[name].update(row[name])
    for name, counter in by_key.items():
        sums[name] = dict(sorted(counter.items()))
    return sums


def clean_breakdown(
    rows: Any, *, service: Service, errors: dict[str, str]
) -> CleanBreakdown | None:
    """The rows checked: tenants and task types the service's own (or “unattributed”),
    one row per (tenant, task type, backend), counts whole and consistent, latencies
    ordered. Faults are added to `errors` under their path (`breakdown[3].tenant`);
    None when there is any."""
    limit = settings.RUN_BREAKDOWN_MAX_ROWS
    if not isinstance(rows, list):
        errors["breakdown"] = (
            "breakdown must be a list of rows, one per tenant, task type and backend."
        )
        return None
    if len(rows) > limit:
        errors["breakdown"] = (
            f"breakdown has {len(rows)} rows; at most {limit} are accepted in one push "
            "(one per tenant, task type and backend)."
        )
        return None
    tenants = sorted(t for t in service.tenants if isinstance(t, str)) if service.tenants else []
    task_types = _service_task_types(service) if rows else []
    row_errors: dict[str, str] = {}
    cleaned_rows: list[BreakdownRow] = []
    given: set[str] = set()
    first_of: dict[tuple[str, str, str], int] = {}
    for index, row in enumerate(rows):
        faults = len(row_errors)
        found = _clean_row(
            index, row, tenants=tenants, task_types=task_types, service=service, errors=row_errors
        )
        if found is None or len(row_errors) > faults:
            continue  # a faulty row is named once, not again as a repeat of another
        cleaned, row_given = found
        key = (cleaned["tenant"], cleaned["task_type"], cleaned["backend"])
        if key in first_of:
            row_errors[f"breakdown[{index}]"] = (
                f"breakdown[{index}] repeats breakdown[{first_of[key]}]: tenant {key[0]!r}, "
                f"task type {key[1]!r}, backend {key[2]!r} (one row per tenant, task type "
                "and backend)."
            )
        else:
            first_of[key] = index
        cleaned_rows.append(cleaned)
        given |= row_given
    if row_errors:
        named = dict(itertools.islice(row_errors.items(), _MAX_ROW_ERRORS))
        errors.update(named)
        if len(row_errors) > len(named):
            errors["breakdown"] = (
                f"breakdown has {len(row_errors)} faults; the first {len(named)} are named."
            )
        return None
    cleaned_rows.sort(key=lambda row: (row["tenant"], row["task_type"], row["backend"]))
    return CleanBreakdown(cleaned_rows, _breakdown_sums(cleaned_rows), frozenset(given))


def _totals_from_rows(fields: Mapping[str, Any], breakdown: CleanBreakdown) -> dict[str, Any]:
    """The fields with each total the push left out taken from the rows' sum (when a row
    gave that count: one no row gave stays unknown)."""
    filled = dict(fields)
    for name in (*SUMMED_COUNTS, *SUMMED_BY_KEY):
        if filled.get(name) is None and name in breakdown.given:
            filled[name] = breakdown.sums[name]
    return filled


def _check_sums(
    given: Mapping[str, Any],
    cleaned: Mapping[str, Any],
    breakdown: CleanBreakdown,
    errors: dict[str, str],
) -> None:
    """Each total the push gave against the rows' sum; each rate against the rows' count."""
    for name in SUMMED_COUNTS:
        if given.get(name) is None or name in errors:
            continue
        if cleaned[name] != breakdown.sums[name]:
            errors[name] = (
                f"{name} is {cleaned[name]} but the breakdown rows add up to "
                f"{breakdown.sums[name]}."
            )
    for name in SUMMED_BY_KEY:
        if given.get(name) is None or name in errors:
            continue
        total, summed = cleaned[name], breakdown.sums[name]
        wrong = [
            f"{name}[{key!r}] is {total.get(key, 0)} but the breakdown rows add up to "
            f"{summed.get(key, 0)}."
            for key in sorted(set(total) | set(summed))
            if total.get(key, 0) != summed.get(key, 0)
        ]
        if wrong:
            errors[name] = " ".join(wrong)
    requests = cleaned["requests"]
    if requests is None or "requests" in errors:
        return
    for rate, count in RATE_COUNTS.items():
        if cleaned[rate] is None or count not in breakdown.given or rate in errors:
            continue
        expected, summed = cleaned[rate] * requests, breakdown.sums[count]
        if abs(expected - summed) > 1:
            errors[rate] = (
                f"{rate} is {cleaned[rate]:g}, {expected:g} of the {requests} requests, but the "
                f"breakdown rows' {count} add up to {summed}."
            )


def recorded_values(summary: RunSummary) -> dict[str, Any]:
    values = {name: getattr(summary, name) for name in _RECORDED if name != "revision"}
    values["revision"] = summary.revision_id
    return values


def _recorded_breakdown(summary: RunSummary) -> dict[str, Any]:
    """The day's breakdown as its last Event recorded it: digest and row count (the rows
    themselves are not in the ledger, so that Events stay small)."""
    subject_type, subject_id = subject_of(summary)
    payload = (
        Event.objects.filter(
            subject_type=subject_type,
            subject_id=subject_id,
            action__in=("run_summary.recorded", "run_summary.replaced"),
        )
        .order_by("-sequence")
        .values_list("payload", flat=True)
        .first()
    )
    recorded = json.loads(payload) if payload else {}
    return {
        "breakdown_sha256": recorded.get("breakdown_sha256"),
        "breakdown_rows": recorded.get("breakdown_rows", 0),
    }


def _breakdown_values(breakdown: CleanBreakdown) -> dict[str, Any]:
    rows = breakdown.rows
    return {"breakdown_sha256": breakdown.sha256 if rows else None, "breakdown_rows": len(rows)}


def _write_breakdown(summary: RunSummary, breakdown: CleanBreakdown, *, replace: bool) -> None:
    if replace:
        RunBreakdown.objects.filter(summary=summary).delete()
    if not breakdown.rows:
        return
    if connection.vendor == "postgresql":
        _copy_breakdown(summary, breakdown.rows)
    else:
        RunBreakdown.objects.bulk_create(
            (RunBreakdown(summary=summary, **row) for row in breakdown.rows),
            batch_size=_BREAKDOWN_BATCH,
        )


def _copy_breakdown(summary: RunSummary, rows: Sequence[BreakdownRow]) -> None:
    """The rows in one COPY: 10,000 rows take ~0.2 s where bulk_create's per-value
    preparation takes over 1 s (bench/breakdown_push.py). The values are already
    clean; only the JSON columns need writing out. Django's query log does not see
    a COPY."""
    quote = connection.ops.quote_name
    columns = ", ".join(quote(name) for name in ("summary_id", *BREAKDOWN_COLUMNS))
    statement = f"COPY {quote(RunBreakdown._meta.db_table)} ({columns}) FROM STDIN"
    with connection.cursor() as cursor, cursor.cursor.copy(statement) as copy:
        for row in rows:
            copy.write_row(
                [
                    summary.pk,
                    *(
                        json.dumps(row[name]) if name in SUMMED_BY_KEY else row[name]
                        for name in BREAKDOWN_COLUMNS
                    ),
                ]
            )


def _refuse_totals_that_leave_rows_behind(
    existing: RunSummary, cleaned: Mapping[str, Any], rows: int
) -> None:
    """A push without `breakdown` may not change a total the day's rows add up to."""
    summed = (*SUMMED_COUNTS, *SUMMED_BY_KEY)
    changed = [name for name in summed if getattr(existing, name) != cleaned[name]]
    if rows and changed:
        raise ValidationError(
            {
                "breakdown": (
                    f"This day has {rows} breakdown rows and {', '.join(changed)} would no "
                    "longer be their sum: push the rows again with the totals, or "
                    "breakdown: [] to drop them."
                )
            }
        )


def _clean_push(
    service: Service,
    fields: Mapping[str, Any],
    *,
    date: Any,
    source: str,
    breakdown: Any,
) -> tuple[dict[str, Any], CleanBreakdown | None]:
    """The day's fields and its breakdown checked together: every fault named at once."""
    errors: dict[str, str] = {}
    rows = (
        clean_breakdown(breakdown, service=service, errors=errors)
        if breakdown is not None
        else None
    )
    totals = _totals_from_rows(fields, rows) if rows and rows.rows else fields
    # With rows, the requests are their sum: a refused row is the fault, not a missing total.
    with_rows = isinstance(breakdown, list) and len(breakdown) > 0
    cleaned = _clean_fields(
        totals,
        date=date,
        source=source,
        require_requests=source == RunSummary.Source.GATEWAY and not with_rows,
        errors=errors,
    )
    if rows and rows.rows:
        _check_sums(fields, cleaned, rows, errors)
    if errors:
        raise ValidationError(errors)
    return cleaned, rows


def record_run_summary(
    service: Service,
    *,
    actor: Actor,
    date: dt.date,
    source: str = RunSummary.Source.GATEWAY,
    revision: Revision | None = None,
    breakdown: list[Mapping[str, Any]] | None = None,
    **fields: Any,
) -> tuple[RunSummary, Outcome]:
    """Record `service`'s day from `source`; returns the row and what happened.

    "recorded": a new day. "replaced": that day was recorded before and now
    says something else; the Event `run_summary.replaced` holds what it said.
    "unchanged": the same numbers (and rows) again (a gateway retrying its push);
    no Event. `revision` defaults to the service's live revision. Raises
    PermissionDenied (see `permissions.can_record_run_summary`) and
    ValidationError naming the field (`breakdown[3].tenant` for a row's).

    `breakdown`: the day per tenant, task type and backend (`clean_breakdown`).
    The totals must be the rows' sums; a total left out is taken from them. The
    rows replace the day's rows; `[]` drops them; None leaves them as they are
    (then the totals they add up to may not change). The Event records their
    digest and count, not the rows.
    """
    service = Service.objects.select_related("team").get(pk=service.pk)
    permissions.ensure_can_record_run_summary(service, actor=actor)
    if revision is not None and revision.service_id != service.pk:
        raise ValidationError({"revision": f"{revision} belongs to another service."})
    cleaned, rows = _clean_push(service, fields, date=date, source=source, breakdown=breakdown)
    with transaction.atomic():
        # One writer per service at a time: the day's row may not exist yet, so it
        # cannot be the row locked.
        locked = Service.objects.select_for_update().get(pk=service.pk)
        cleaned["revision_id"] = revision.pk if revision is not None else locked.live_revision_id
        existing = RunSummary.objects.filter(service=locked, date=date, source=source).first()
        if existing is None:
            summary = RunSummary(
                service=locked,
                date=date,
                source=source,
                recorded_by=actor,
                recorded_at=timezone.now(),
                **cleaned,
            )
            summary.save(force_insert=True)
            if rows is not None:
                _write_breakdown(summary, rows, replace=False)
            append_event(
                actor=actor,
                action="run_summary.recorded",
                subject=summary,
                payload={
                    "date": date,
                    "source": source,
                    "replaced": False,
                    **recorded_values(summary),
                    **(_breakdown_values(rows) if rows is not None else _NO_BREAKDOWN),
                },
            )
            return summary, "recorded"
        recorded_breakdown = _recorded_breakdown(existing)
        if rows is None:
            _refuse_totals_that_leave_rows_behind(
                existing, cleaned, RunBreakdown.objects.filter(summary=existing).count()
            )
        before = {**recorded_values(existing), **recorded_breakdown}
        for name, value in cleaned.items():
            setattr(existing, name, value)
        after = {
            **recorded_values(existing),
            **(_breakdown_values(rows) if rows is not None else recorded_breakdown),
        }
        if after == before:
            return existing, "unchanged"
        existing.recorded_by = actor
        existing.recorded_at = timezone.now()
        existing.save(update_fields=[*cleaned, "recorded_by", "recorded_at"])
        if rows is not None and after["breakdown_sha256"] != before["breakdown_sha256"]:
            _write_breakdown(existing, rows, replace=True)
        changed = sorted(name for name in after if after[name] != before[name])
        append_event(
            actor=actor,
            action="run_summary.replaced",
            subject=existing,
            payload={
                "date": date,
                "source": source,
                "replaced": True,
                "changed": changed,
                "before": {name: before[name] for name in changed},
                **after,
            },
        )
        return existing, "replaced"


def record_scraped_day(
    service: Service,
    *,
    actor: Actor,
    date: dt.date,
    engine: EngineMetrics,
    before: Scrape,
    after: Scrape,
    revision: Revision | None = None,
    window: Mapping[str, Any] | None = None,
) -> tuple[RunSummary, Outcome]:
    """Record `service`'s day from two scrapes of its engine's metrics (source "scrape").

    `window` says what the scrapes were (their times, or their files) and goes
    into the summary's details with what `summarize` found (metric names read,
    counter resets, what the engine does not expose).
    """
    found = summarize(engine, before, after)
    fields = dict(found.fields)
    fields["details"] = {
        **found.details,
        "window": dict(window or {"before": before.source, "after": after.source}),
    }
    return record_run_summary(
        service,
        actor=actor,
        date=date,
        source=RunSummary.Source.SCRAPE,
        revision=revision,
        **fields,
    )
