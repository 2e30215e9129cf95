"""A service's day of run evidence computed from the model calls its traces carried.

When the gateway sets `ledger.service`, `ledger.tenant` and `ledger.task_type` on its
spans, the day's breakdown (`ledger.RunBreakdown`: one row per tenant, task type and
backend) can be computed from them instead of pushed. The day is recorded as the
gateway's own push is — source `gateway`, the same observer read another way — through
`record_run_summary` (the same checks, the totals the rows' sums, the idempotent
replace, one Event), with `details["from"] = "traces"` saying which way it came; a push
for the same day later replaces it, and the Event says so.

Per row: requests (spans), input and output tokens, errors by `error.type`, rate-limit
hits (an error type naming 429, a rate limit or a quota), retries (`ledger.retry_count`
summed), truncations (finish reason `length`), degradations by `ledger.degradation`,
and p50/p95/p99 TTFT and TPOT ((duration - TTFT) / (output tokens - 1)). The day's
TTFT and end-to-end percentiles are over all its spans. A tenant or task type the
service does not list is `unattributed`, as the gateway would send it; the backend is
the address the span names (`server.address:port`).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from ledger.models import ModelCallSpan, RunSummary, Service
from ledger.models.run_evidence import UNATTRIBUTED
from ledger.services import record_run_summary
from ledger.traces.otlp import is_limit_error
from lib.actors import Actor
from lib.percentiles import percentiles

FROM = "traces"


def _percentiles(values: list[float], name: str) -> dict[str, float]:
    if not values:
        return {}
    found = percentiles(np.asarray(values, dtype=float))
    return {f"{name}_p{p}_ms": round(getattr(found, f"p{p}"), 3) for p in (50, 95, 99)}


def _tpot(span: ModelCallSpan) -> float | None:
    if span.ttft_ms is None or not span.output_tokens or span.output_tokens < 2:
        return None
    return max(span.duration_ms - span.ttft_ms, 0.0) / (span.output_tokens - 1)


def _day(date: dt.date) -> Any:
    start = dt.datetime.combine(date, dt.time(), tzinfo=dt.UTC)
    return ModelCallSpan.objects.filter(
        started_at__gte=start, started_at__lt=start + dt.timedelta(days=1)
    ).order_by()


def spans_of_day(service: Service, date: dt.date) -> Iterable[ModelCallSpan]:
    return _day(date).filter(service_slug=service.slug).iterator(chunk_size=5_000)


def services_with_spans(date: dt.date) -> Any:
    """The services the day's spans name (one query, through the day's partition),
    so that a nightly run reads no service that had no traced call."""
    return Service.objects.filter(slug__in=_day(date).values("service_slug").distinct()).order_by(
        "slug"
    )


def day_from_spans(
    service: Service, spans: Iterable[ModelCallSpan]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The day's totals (latencies; the counts are the rows' sums) and its rows."""
    tenants = set(service.tenants or [])
    task_types = {t.slug for t in service.task_types.all()}
    groups: dict[tuple[str, str, str], list[ModelCallSpan]] = defaultdict(list)
    for span in spans:
        key = (
            span.tenant if span.tenant in tenants else UNATTRIBUTED,
            span.task_type if span.task_type in task_types else UNATTRIBUTED,
            f"{span.server_address}:{span.server_port}"
            if span.server_port
            else span.server_address,
        )
        groups[key].append(span)
    rows = []
    ttfts: list[float] = []
    e2es: list[float] = []
    for (tenant, task_type, backend), group in sorted(groups.items()):
        errors = Counter(span.error_type for span in group if span.error_type)
        row_ttft = [span.ttft_ms for span in group if span.ttft_ms is not None]
        tpots = [tpot for span in group if (tpot := _tpot(span)) is not None]
        rows.append(
            {
                "tenant": tenant,
                "task_type": task_type,
                "backend": backend[:120],
                "requests": len(group),
                "input_tokens": sum(span.input_tokens or 0 for span in group),
                "output_tokens": sum(span.output_tokens or 0 for span in group),
                "error_counts": dict(sorted(errors.items())),
                "rate_limit_hits": sum(n for code, n in errors.items() if is_limit_error(code)),
                "retries": sum(span.retry_count or 0 for span in group),
                "truncations": sum(1 for span in group if "length" in span.finish_reasons),
                "degradations": dict(
                    sorted(Counter(s.degradation for s in group if s.degradation).items())
                ),
                **_percentiles(row_ttft, "ttft"),
                **_percentiles(tpots, "tpot"),
            }
        )
        ttfts += row_ttft
        e2es += [span.duration_ms for span in group]
    totals = {**_percentiles(ttfts, "ttft"), **_percentiles(e2es, "e2e")}
    return totals, rows


def record_day_from_traces(
    service: Service, date: dt.date, *, actor: Actor
) -> tuple[RunSummary, str] | None:
    """Record the day from its spans; None when no span of the service fell on it (a day
    with none is not a day of zero requests: its evidence may come from elsewhere)."""
    totals, rows = day_from_spans(service, spans_of_day(service, date))
    if not rows:
        return None
    return record_run_summary(
        service,
        actor=actor,
        date=date,
        source=RunSummary.Source.GATEWAY,
        breakdown=list[Mapping[str, Any]](rows),
        details={"from": FROM, "spans": sum(row["requests"] for row in rows)},
        **totals,
    )
