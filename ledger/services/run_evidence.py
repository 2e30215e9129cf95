"""Daily run evidence: record one service's day, from the gateway or from a scrape.

`clean_run_summary` checks every field and names it in the message (rates are
fractions from 0 to 1, percentiles do not decrease from p50 to p99, counts are
whole and not negative, the day is not in the future). `record_run_summary`
writes the row and its Event in one transaction under the service's row lock,
so two pushes of the same day, at the same moment, are applied one after the
other. The same day again replaces the row and the Event says `replaced`, with
what it replaced; the same numbers again record nothing.
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
from collections.abc import Mapping
from typing import Any, Literal

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from ledger import permissions
from ledger.chain import append_event
from ledger.metrics_import import EngineMetrics, Scrape, summarize
from ledger.models import Revision, RunSummary, Service
from ledger.models.run_evidence import (
    COUNT_FIELDS,
    LATENCY_FIELDS,
    LATENCY_METRICS,
    PERCENTILES,
    RATE_FIELDS,
    RUN_SUMMARY_FIELDS,
    TOKEN_FIELDS,
)
from lib.actors import Actor

__all__ = [
    "RUN_SUMMARY_FIELDS",
    "clean_run_summary",
    "record_run_summary",
    "record_scraped_day",
    "recorded_values",
]

Outcome = Literal["recorded", "replaced", "unchanged"]

# Every column the Event records (error_rate is computed from error_counts).
_RECORDED = ("revision", *RUN_SUMMARY_FIELDS, "error_rate")
_MAX_KEYS = 200
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
    for metric in LATENCY_METRICS:
        names = [f"{metric}_{p}_ms" for p in PERCENTILES]
        given = [(n, cleaned[n]) for n in names if cleaned[n] is not None]
        for (low_name, low), (high_name, high) in itertools.pairwise(given):
            if high < low and high_name not in errors:
                errors[high_name] = (
                    f"{high_name} ({high:g}) is below {low_name} ({low:g}): percentiles must "
                    "not decrease (p50 ≤ p95 ≤ p99)."
                )
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
    if errors:
        raise ValidationError(errors)
    return cleaned


def recorded_values(summary: RunSummary) -> dict[str, Any]:
    values = {name: getattr(summary, name) for name in _RECORDED if name != "revision"}
    values["revision"] = summary.revision_id
    return values


def record_run_summary(
    service: Service,
    *,
    actor: Actor,
    date: dt.date,
    source: str = RunSummary.Source.GATEWAY,
    revision: Revision | None = None,
    **fields: Any,
) -> tuple[RunSummary, Outcome]:
    """Record `service`'s day from `source`; returns the row and what happened.

    "recorded": a new day. "replaced": that day was recorded before and now
    says something else; the Event `run_summary.replaced` holds what it said.
    "unchanged": the same numbers again (a gateway retrying its push); no Event.
    `revision` defaults to the service's live revision. Raises PermissionDenied
    (see `permissions.can_record_run_summary`) and ValidationError naming the field.
    """
    service = Service.objects.select_related("team").get(pk=service.pk)
    permissions.ensure_can_record_run_summary(service, actor=actor)
    if revision is not None and revision.service_id != service.pk:
        raise ValidationError({"revision": f"{revision} belongs to another service."})
    cleaned = clean_run_summary(
        fields, date=date, source=source, require_requests=source == RunSummary.Source.GATEWAY
    )
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
            append_event(
                actor=actor,
                action="run_summary.recorded",
                subject=summary,
                payload={
                    "date": date,
                    "source": source,
                    "replaced": False,
                    **recorded_values(summary),
                },
            )
            return summary, "recorded"
        before = recorded_values(existing)
        for name, value in cleaned.items():
            setattr(existing, name, value)
        after = recorded_values(existing)
        if after == before:
            return existing, "unchanged"
        existing.recorded_by = actor
        existing.recorded_at = timezone.now()
        existing.save(update_fields=[*cleaned, "recorded_by", "recorded_at"])
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
