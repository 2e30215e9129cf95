"""Demo run evidence: 60 days of the gateway's daily summaries for the live demo services,
each day split by tenant and task type (`demo_breakdown`).

One of them drifts where everybody can see it: kb-assistant served r2 until
20 days ago, then r3, and from then on its p95 TTFT climbs past the 800 ms SLO
(a review's latency trigger, and the service page's trend, show it). The
others hold steady with a little day-to-day noise.

Demo services go through the verb (`record_run_summary`), so every day is an
Event; the numbers of a day are a function of the service and the date, so a
rerun the same day records nothing. The fleet (`seed_demo --scale N`, for
benchmarks) gets its days inserted 60 at a time per service with the same
Events appended in the same transaction, as `ledger.demo.fleet` does for
revisions: through the verb, 120,000 days would take most of an hour.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable, Iterable
from typing import Any

from django.db import transaction
from django.utils import timezone

from ledger.chain import NewEvent, append_events
from ledger.models import Revision, RunSummary, Service
from ledger.services import record_run_summary, recorded_values

DAYS = 60
DRIFTING_SERVICE = "kb-assistant"
DRIFT_DAYS = 20  # the drift starts when r3 starts serving, this many days ago
DRIFT_FROM_REVISION = 2
# A tenant near its quota: rate-limited on QUOTA_DAYS of the last 7 days (the review
# sweep's quota_pressure trigger); the other days' 429s are the gateway's own limit,
# before a tenant is known (unattributed).
QUOTA_SERVICE, QUOTA_TENANT, QUOTA_DAYS = "kb-assistant", "field-service", 5
# Prompt and answer tokens per request by task type; r3 of the drifting service answers
# a third shorter (the AWQ fine-tune is terser): the same GPUs for fewer tokens, a step
# up in its cost per million output tokens after it went live.
TOKENS = {
    "chat": (900, 260),
    "rag": (3200, 380),
    "sql": (1400, 150),
    "tool-use": (1800, 190),
    "summarization": (6000, 420),
    "translation": (700, 720),
    "code-review": (5200, 520),
}
DEFAULT_TOKENS = (1000, 300)
SHORTER_ANSWERS = 0.65


def _today() -> dt.date:
    return timezone.now().astimezone(dt.UTC).date()


def _day_numbers(
    slug: str, date: dt.date, *, base_ttft: float, drift: float = 0.0
) -> dict[str, Any]:
    """One plausible day; the same service and date give the same numbers."""
    rng = random.Random(f"{slug}:{date.isoformat()}")  # noqa: S311 - demo noise, not security
    requests = int(rng.uniform(8000, 14000) * (0.7 if date.weekday() >= 5 else 1.0))
    ttft_p95 = round(base_ttft * rng.uniform(0.93, 1.07) + drift, 1)
    ttft_p50 = round(ttft_p95 * rng.uniform(0.3, 0.4), 1)
    ttft_p99 = round(ttft_p95 * rng.uniform(1.5, 1.8), 1)
    tpot_p50 = round(rng.uniform(14, 18), 1)
    failed_429 = int(requests * rng.uniform(0.0005, 0.002))
    failed_5xx = int(requests * rng.uniform(0.0002, 0.0015) * (1 + drift / 400))
    return {
        "requests": requests,
        "ttft_p50_ms": ttft_p50,
        "ttft_p95_ms": ttft_p95,
        "ttft_p99_ms": ttft_p99,
        "tpot_p50_ms": tpot_p50,
        "tpot_p95_ms": round(tpot_p50 * 1.5, 1),
        "tpot_p99_ms": round(tpot_p50 * 1.9, 1),
        "e2e_p50_ms": round(ttft_p50 + 220 * tpot_p50, 1),
        "e2e_p95_ms": round(ttft_p95 + 480 * tpot_p50 * 1.5, 1),
        "e2e_p99_ms": round(ttft_p99 + 700 * tpot_p50 * 1.9, 1),
        "error_counts": {"429": failed_429, "503": failed_5xx},
        "rate_4xx": round(failed_429 / requests, 6),
        "rate_5xx": round(failed_5xx / requests, 6),
        "refusal_rate": round(rng.uniform(0.004, 0.012), 4),
        "structured_output_error_rate": round(rng.uniform(0.0, 0.004), 4),
        "truncation_rate": round(rng.uniform(0.01, 0.03), 4),
        "cache_hit_rate": round(rng.uniform(0.3, 0.5), 3),
        "degradations": {"shorter-context": int(requests * rng.uniform(0, 0.004))},
        "rate_limit_hits": failed_429,
        "timeouts": int(rng.uniform(0, 6)),
        "retries": int(rng.uniform(5, 30)),
        "returned_by_humans": int(rng.uniform(0, 5)),
    }


def _split(total: int, weights: list[float]) -> list[int]:
    """`total` in whole parts proportional to `weights`, adding up to it exactly."""
    whole = sum(weights)
    exact = [total * w / whole for w in weights]
    parts = [int(x) for x in exact]
    for index in sorted(range(len(exact)), key=lambda i: parts[i] - exact[i])[: total - sum(parts)]:
        parts[index] += 1
    return parts


def demo_breakdown(
    service: Service, date: dt.date, fields: dict[str, Any], *, today: dt.date, shorter: bool
) -> list[dict[str, Any]]:
    """The day split by tenant and task type (and an unattributed row for the gateway's own
    rejections), every count adding up to the day's total; the same day gives the same
    rows. The quota tenant takes the day's 429s on QUOTA_DAYS of the last 7 days."""
    rng = random.Random(f"{service.slug}:{date.isoformat()}:breakdown")  # noqa: S311 - demo
    tenants = list(service.tenants) or ["unattributed"]
    task_types = [t.slug for t in service.task_types.all()] or ["unattributed"]
    keys = [(tenant, task) for tenant in tenants for task in task_types]
    keys.append(("unattributed", "unattributed"))
    weights = [rng.uniform(0.5, 1.5) * (0.6**index) for index in range(len(keys) - 1)]
    weights.append(0.01)
    requests = _split(fields["requests"], weights)
    pressed = (
        service.slug == QUOTA_SERVICE
        and QUOTA_TENANT in tenants
        and 0 < (today - date).days <= 7
        and (today - date).days % 7 < QUOTA_DAYS
    )
    limited = fields["error_counts"]["429"]
    rejected = [0] * len(keys)
    if pressed:
        own = [index for index, key in enumerate(keys) if key[0] == QUOTA_TENANT]
        for index, hits in zip(own, _split(limited, [requests[i] for i in own]), strict=True):
            rejected[index] = min(hits, requests[index])
    rejected[-1] = limited - sum(rejected)
    requests[-1] = max(requests[-1], rejected[-1])
    shortfall = sum(requests) - fields["requests"]
    if shortfall:  # the unattributed row grew to hold the gateway's rejections
        biggest = max(range(len(keys) - 1), key=lambda i: requests[i])
        requests[biggest] -= shortfall
    served = [r - x for r, x in zip(requests, rejected, strict=True)]

    def share(total: int) -> list[int]:
        return _split(total, [max(n, 0) for n in served]) if any(served) else [0] * len(keys)

    n = fields["requests"]
    failed_5xx = share(fields["error_counts"]["503"])
    refusals = share(round(fields["refusal_rate"] * n))
    truncations = share(round(fields["truncation_rate"] * n))
    structured = share(round(fields["structured_output_error_rate"] * n))
    degraded = share(fields["degradations"]["shorter-context"])
    timeouts, retries = share(fields["timeouts"]), share(fields["retries"])
    returned = share(fields["returned_by_humans"])
    rows = []
    for index, (tenant, task) in enumerate(keys):
        prompt, answer = TOKENS.get(task, DEFAULT_TOKENS)
        if shorter:
            answer = int(answer * SHORTER_ANSWERS)
        ttft = fields["ttft_p95_ms"] * rng.uniform(0.9, 1.1)
        row: dict[str, Any] = {
            "tenant": tenant,
            "task_type": task,
            "requests": requests[index],
            "input_tokens": int(served[index] * prompt * rng.uniform(0.9, 1.1)),
            "output_tokens": int(served[index] * answer * rng.uniform(0.9, 1.1)),
            "error_counts": {"429": rejected[index], "503": failed_5xx[index]},
            "rate_limit_hits": rejected[index],
            "degradations": {"shorter-context": degraded[index]},
            "refusals": refusals[index],
            "truncations": truncations[index],
            "structured_errors": structured[index],
            "timeouts": timeouts[index],
            "retries": retries[index],
            "returned_by_humans": returned[index],
        }
        if served[index]:
            row["latency"] = {
                "ttft_p50_ms": round(ttft * 0.35, 1),
                "ttft_p95_ms": round(ttft, 1),
                "ttft_p99_ms": round(ttft * 1.6, 1),
                "tpot_p50_ms": fields["tpot_p50_ms"],
                "tpot_p95_ms": fields["tpot_p95_ms"],
                "tpot_p99_ms": fields["tpot_p99_ms"],
            }
        rows.append(row)
    return rows


def _base_ttft(service: Service) -> float:
    slo = service.slo_ttft_p95_ms
    return slo * 0.75 if slo else 600.0


def demo_days(
    service: Service, *, today: dt.date | None = None
) -> Iterable[tuple[dt.date, dict[str, Any], int | None]]:
    """(date, fields, revision number or None for the live one) for each of the last DAYS
    days; the drifting service's last DRIFT_DAYS days climb past its SLO."""
    today = today or _today()
    base = _base_ttft(service)
    drifts = service.slug == DRIFTING_SERVICE
    for back in range(DAYS, 0, -1):
        date = today - dt.timedelta(days=back)
        drift = 0.0
        number = None
        if drifts:
            if back > DRIFT_DAYS:
                number = DRIFT_FROM_REVISION
            else:
                # About 25 ms a day: from 600 ms to over 1,000 ms, past the 800 ms SLO
                # about twelve days in.
                drift = 25.0 * (DRIFT_DAYS - back + 1)
        fields = _day_numbers(service.slug, date, base_ttft=base, drift=drift)
        shorter = drifts and back <= DRIFT_DAYS
        fields["breakdown"] = demo_breakdown(service, date, fields, today=today, shorter=shorter)
        yield date, fields, number


def seed_run_evidence(service_slugs: list[str], *, today: dt.date | None = None) -> int:
    """60 days for each live demo service, through the verb; returns how many days were new."""
    new = 0
    services = Service.objects.filter(slug__in=service_slugs, live_revision__isnull=False)
    for service in services.select_related("team"):
        revisions = {r.number: r for r in Revision.objects.filter(service=service)}
        for date, fields, number in demo_days(service, today=today):
            revision = revisions.get(number) if number is not None else None
            _, outcome = record_run_summary(
                service, actor=None, date=date, revision=revision, **fields
            )
            new += outcome == "recorded"
    return new


def _fleet_day(service: Service, date: dt.date, index: int) -> RunSummary:
    fields = _day_numbers(service.slug, date, base_ttft=_base_ttft(service))
    failed = sum(fields["error_counts"].values())
    return RunSummary(
        service=service,
        date=date,
        source=RunSummary.Source.GATEWAY,
        revision_id=service.live_revision_id,
        error_rate=failed / fields["requests"],
        recorded_at=timezone.now(),
        **fields,
    )


def seed_fleet_run_evidence(
    *, actor=None, progress: Callable[[int, int], None] | None = None
) -> int:
    """60 days for each fleet service that has none yet; returns how many services got them.

    One transaction per service, so an interrupted run keeps what it finished.
    """
    today = _today()
    first = today - dt.timedelta(days=DAYS)
    done = set(
        RunSummary.objects.filter(service__slug__startswith="fleet-", date=first).values_list(
            "service_id", flat=True
        )
    )
    todo = list(
        Service.objects.filter(slug__startswith="fleet-").exclude(pk__in=done).order_by("slug")
    )
    every = max(1, len(todo) // 20)
    for count, service in enumerate(todo, start=1):
        with transaction.atomic():
            days = RunSummary.objects.bulk_create(
                _fleet_day(service, today - dt.timedelta(days=back), back)
                for back in range(DAYS, 0, -1)
            )
            append_events(
                [
                    NewEvent(
                        action="run_summary.recorded",
                        subject=summary,
                        subject_label=str(summary),
                        service_id=service.pk,
                        payload={
                            "date": summary.date,
                            "source": summary.source,
                            "replaced": False,
                            **recorded_values(summary),
                        },
                    )
                    for summary in days
                ],
                actor=actor,
            )
        if progress and (count % every == 0 or count == len(todo)):
            progress(count, len(todo))
    return len(todo)
