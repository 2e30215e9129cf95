"""Why a service needs a review, and what its checklist starts with: pure functions of the
facts `review_facts.gather` read, so the sweep judges thousands of services without a
query each.

Each trigger is a `Finding`: its kind, the occurrence it is about (`key`: the revision
that drifted, the run that regressed, the event that changed a license), a sentence with
the numbers, and the numbers themselves. The thresholds are settings (`REVIEW_*`, read
when judging), the per-tier ones of `releases.policy` (cost drift, quota pressure) and the
constants below; docs/reviews.md says each rule in words.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, TypedDict

from django.conf import settings
from django.urls import reverse

from ledger import queries as ledger_queries
from ledger.models import Capability, GatewayPolicy, LoadTestReport, ModelAsset, Revision, Service
from releases import policy
from releases.cost.report import build_report
from releases.governance.queries.readiness import _verification_reasons
from releases.models import ReviewChecklistItem, ReviewTrigger
from releases.reviews.queries.review_facts import RECENT_DAYS, Day, ServiceFacts, SweepContext
from replay.models import Run

Kind = ReviewTrigger.Kind
Key = ReviewChecklistItem.Key

# The drift window: the last full days of run evidence, and how many of them must hold a
# number before a drift is judged at all.
DRIFT_WINDOW_DAYS = RECENT_DAYS
DRIFT_MIN_DAYS = 3
# An error rate must also rise by this many percentage points over its baseline: 0.01 %
# to 0.02 % doubles, and means nothing.
ERROR_RATE_FLOOR_POINTS = 0.1
# The load test that stands for "what was measured at release": the first of these
# workload classes the live revision has a report of.
BASELINE_WORKLOADS = ("short", "streaming", "high_concurrency", "structured", "long_context")


@dataclass(frozen=True)
class Finding:
    kind: str
    key: str
    summary: str
    numbers: dict[str, Any]


class Fact(TypedDict):
    label: str
    value: str
    url: str


@dataclass(frozen=True)
class ItemPrefill:
    key: str
    facts: list[Fact]
    flags: list[str]


# ---------------------------------------------------------------- formatting


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f} ms"


def _pct(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f} %"


def _fact(label: str, value: str, url: str = "") -> Fact:
    return Fact(label=label, value=value, url=url)


def _day(value: dt.date | dt.datetime) -> str:
    return value.strftime("%Y-%m-%d")


def version_key(version: str) -> tuple[tuple[int, Any], ...]:
    """A natural sort key: 0.10.1 after 0.9.2, b4589 after b4000."""
    return tuple(
        (0, int(part)) if part.isdigit() else (1, part)
        for part in re.findall(r"\d+|[A-Za-z]+", version)
    )


def revision_url(revision: Revision, service: Service) -> str:
    return reverse("ledger:revision_detail", args=[service.slug, revision.number])


def report_url(report: LoadTestReport, service: Service, revision: Revision) -> str:
    return reverse("ledger:loadtest_detail", args=[service.slug, revision.number, report.pk])


def run_url(run: Run) -> str:
    return reverse("replay:run_detail", args=[run.pk])


# ---------------------------------------------------------------- numbers the rules share


@dataclass(frozen=True)
class Window:
    first: dt.date
    last: dt.date
    days: list[Day]


def recent_window(facts: ServiceFacts, today: dt.date) -> Window:
    """The last DRIFT_WINDOW_DAYS full days (today is not over yet)."""
    first = today - dt.timedelta(days=DRIFT_WINDOW_DAYS)
    return Window(
        first, today - dt.timedelta(days=1), [d for d in facts.days if d["date"] >= first]
    )


def weighted_ttft_p95(days: list[Day]) -> float | None:
    """The window's p95 TTFT: each day's p95 weighted by its requests (equally when a day's
    count is unknown, as with llama.cpp's metrics)."""
    measured = [d for d in days if d["ttft_p95_ms"] is not None]
    if len(measured) < DRIFT_MIN_DAYS:
        return None
    if all(d["requests"] for d in measured):
        total = sum(d["requests"] or 0 for d in measured)
        return sum((d["ttft_p95_ms"] or 0) * (d["requests"] or 0) for d in measured) / total
    return sum(d["ttft_p95_ms"] or 0 for d in measured) / len(measured)


def error_rate_pct(days: list[Day]) -> tuple[float | None, int]:
    """Failed requests over requests across the days, in percent, and the requests."""
    counted = [d for d in days if d["requests"] and d["error_rate"] is not None]
    if len(counted) < DRIFT_MIN_DAYS:
        return None, 0
    requests = sum(d["requests"] or 0 for d in counted)
    failed = sum((d["error_rate"] or 0) * (d["requests"] or 0) for d in counted)
    return 100 * failed / requests, requests


def timeout_rate_pct(days: list[Day]) -> tuple[float | None, int]:
    """Timed-out requests over requests across the days that counted their timeouts, in
    percent, and those days' requests (None below DRIFT_MIN_DAYS such days)."""
    counted = [d for d in days if d["requests"] and d["timeouts"] is not None]
    if len(counted) < DRIFT_MIN_DAYS:
        return None, 0
    requests = sum(d["requests"] or 0 for d in counted)
    return 100 * sum(d["timeouts"] or 0 for d in counted) / requests, requests


def first_week(facts: ServiceFacts, before: dt.date) -> list[Day]:
    """The live revision's first DRIFT_WINDOW_DAYS days of run evidence in view, ending
    before `before` (the recent window): what the service did once it went live."""
    own = [d for d in facts.days if d["revision_id"] == facts.live.pk and d["date"] < before]
    return own[:DRIFT_WINDOW_DAYS]


def baseline_report(facts: ServiceFacts) -> LoadTestReport | None:
    """The live revision's load test "at release": of the first BASELINE_WORKLOADS class it
    has, the newest report measured before the revision first served, else the oldest."""
    served = facts.live.served_at
    for workload in BASELINE_WORKLOADS:
        reports = [r for r in facts.reports if r.workload == workload]
        if not reports:
            continue
        before = [r for r in reports if served is None or r.measured_at <= served]
        if before:
            return max(before, key=lambda r: (r.measured_at, r.pk))
        return min(reports, key=lambda r: (r.measured_at, r.pk))
    return None


def newer_engine_versions(facts: ServiceFacts, context: SweepContext) -> list[str]:
    runtime = facts.live.runtime
    mine = version_key(runtime.engine_version)
    known = context.engine_versions.get(runtime.engine, [])
    return sorted((v for v in known if version_key(v) > mine), key=version_key)


def verification_limit_days(tier: str) -> int:
    limits = policy.ROLLBACK_VERIFICATION_MAX_AGE_DAYS
    return limits.get(tier, min(limits.values()))


# ---------------------------------------------------------------- the triggers


def cadence(facts: ServiceFacts, context: SweepContext) -> Finding | None:
    """Due `review_cadence_days` after the last concluded review (its next due date), or
    after the service was created."""
    service = facts.service
    last = facts.last_concluded
    last_review = None
    if last is not None and last.next_due_on is not None and last.concluded_at is not None:
        last_review = last.pk
        due, since, since_what = (
            last.next_due_on,
            last.concluded_at.date(),
            f"review #{last.pk} concluded",
        )
    else:
        since = service.created_at.astimezone(dt.UTC).date()
        due, since_what = since + dt.timedelta(days=service.review_cadence_days), "service created"
    if context.today < due:
        return None
    late = (context.today - due).days
    return Finding(
        Kind.CADENCE,
        f"due:{due.isoformat()}",
        f"A review every {service.review_cadence_days} days was due on {due:%Y-%m-%d} "
        f"({since_what} {since:%Y-%m-%d}" + (f"; {late} days ago" if late else "; today") + ").",
        {
            "cadence_days": service.review_cadence_days,
            "since": since.isoformat(),
            "since_what": since_what,
            "last_review": last_review,
            "due_on": due.isoformat(),
            "days_past_due": late,
        },
    )


def latency_drift(facts: ServiceFacts, context: SweepContext) -> Finding | None:
    """The 7-day p95 TTFT above the SLO, or more than REVIEW_LATENCY_DRIFT_PCT above the
    p95 TTFT the baseline load test measured at release."""
    window = recent_window(facts, context.today)
    p95 = weighted_ttft_p95(window.days)
    if p95 is None:
        return None
    slo = facts.service.slo_ttft_p95_ms
    report = baseline_report(facts)
    baseline = report.ttft_p95_ms if report is not None else None
    limit = settings.REVIEW_LATENCY_DRIFT_PCT
    increase = (p95 / baseline - 1) * 100 if baseline else None
    above_slo = slo is not None and p95 > slo
    above_baseline = increase is not None and increase > limit
    if not (above_slo or above_baseline):
        return None
    said = []
    if above_slo:
        said.append(f"above the {_ms(slo)} SLO")
    if above_baseline and report is not None:
        said.append(
            f"{increase:.0f} % above the {_ms(baseline)} its {report.workload} load test measured "
            f"at release ({_day(report.measured_at)}; the limit is {limit} %)"
        )
    return Finding(
        Kind.LATENCY_DRIFT,
        f"revision:{facts.live.pk}",
        f"7-day p95 TTFT {_ms(p95)} ({len(window.days)} days to {window.last:%Y-%m-%d}) is "
        + " and ".join(said)
        + ".",
        {
            "ttft_p95_7d_ms": round(p95, 1),
            "window_first": window.first.isoformat(),
            "window_last": window.last.isoformat(),
            "days": len([d for d in window.days if d["ttft_p95_ms"] is not None]),
            "slo_ttft_p95_ms": slo,
            "baseline_ttft_p95_ms": baseline,
            "baseline_report": report.pk if report is not None else None,
            "baseline_workload": report.workload if report is not None else None,
            "baseline_measured_at": report.measured_at.isoformat() if report else None,
            "increase_pct": round(increase, 1) if increase is not None else None,
            "limit_pct": limit,
            "above_slo": above_slo,
            "above_baseline": above_baseline,
            "revision": facts.live.label,
            "revision_number": facts.live.number,
        },
    )


def error_rate_drift(facts: ServiceFacts, context: SweepContext) -> Finding | None:
    """The 7-day error rate above the SLO, or more than REVIEW_ERROR_RATE_DRIFT_PCT (and
    ERROR_RATE_FLOOR_POINTS) above the live revision's first week of run evidence."""
    window = recent_window(facts, context.today)
    rate, requests = error_rate_pct(window.days)
    if rate is None:
        return None
    slo = facts.service.slo_error_rate_pct
    week = first_week(facts, window.first)
    baseline, _ = error_rate_pct(week)
    limit = settings.REVIEW_ERROR_RATE_DRIFT_PCT
    increase = (rate / baseline - 1) * 100 if baseline else None
    above_slo = slo is not None and rate > float(slo)
    above_baseline = (
        baseline is not None
        and increase is not None
        and increase > limit
        and rate - baseline >= ERROR_RATE_FLOOR_POINTS
    )
    if not (above_slo or above_baseline):
        return None
    said = []
    if above_slo:
        said.append(f"above the {_pct(float(slo or 0))} SLO")
    if above_baseline:
        said.append(
            f"{increase:.0f} % above the {_pct(baseline)} of {facts.live.label}'s first week "
            f"({_day(week[0]['date'])} to {_day(week[-1]['date'])}; the limit is {limit} %)"
        )
    return Finding(
        Kind.ERROR_RATE_DRIFT,
        f"revision:{facts.live.pk}",
        f"7-day error rate {_pct(rate)} ({requests:,} requests to {window.last:%Y-%m-%d}) is "
        + " and ".join(said)
        + ".",
        {
            "error_rate_7d_pct": round(rate, 4),
            "requests_7d": requests,
            "window_first": window.first.isoformat(),
            "window_last": window.last.isoformat(),
            "slo_error_rate_pct": float(slo) if slo is not None else None,
            "baseline_error_rate_pct": round(baseline, 4) if baseline is not None else None,
            "baseline_first": week[0]["date"].isoformat() if week and baseline else None,
            "baseline_last": week[-1]["date"].isoformat() if week and baseline else None,
            "increase_pct": round(increase, 1) if increase is not None else None,
            "limit_pct": limit,
            "above_slo": above_slo,
            "above_baseline": above_baseline,
            "revision": facts.live.label,
        },
    )


def _license_words(change: Any) -> str:
    before, after = change.before, change.after
    if "license" in after:
        return (
            f"its license was changed (license #{before.get('license')} → #{after.get('license')})"
        )
    was, now = before.get("license_approval") or "pending", after.get("license_approval")
    if was == "approved":
        return f"its license approval was revoked (approved → {now})"
    return f"its license was rejected ({was} → {now})"


def license_change(facts: ServiceFacts, context: SweepContext) -> Finding | None:
    """The live asset's license changed, or its approval was revoked or refused, since
    the live revision first served (from the asset's events)."""
    if not facts.license_changes:
        return None
    last = facts.license_changes[-1]
    asset = facts.live.model_asset
    return Finding(
        Kind.LICENSE,
        f"event:{last.sequence}",
        f"{asset} is live and {_license_words(last)} by {last.actor} on {_day(last.at)} "
        f"(event #{last.sequence}); it is now {asset.license.spdx_id}, "
        f"{asset.get_license_approval_display().lower()}.",
        {
            "asset": asset.pk,
            "asset_label": str(asset),
            "license": asset.license.spdx_id,
            "approval": asset.license_approval,
            "changes": [
                {
                    "event": change.sequence,
                    "at": change.at.isoformat(),
                    "by": change.actor,
                    "action": change.action,
                    "before": change.before,
                    "after": change.after,
                }
                for change in facts.license_changes
            ],
        },
    )


def rollback_verification(facts: ServiceFacts, context: SweepContext) -> Finding | None:
    """The plan's target was verified, but that verification is older than the tier's
    limit or did not pass (the readiness verdict's own words). Never verified is not a
    trigger: the checklist flags it; nor is a verification that reached no backend, which
    is no verdict (it awaits confirmation, and the checklist flags it too)."""
    plan = facts.plan
    run = facts.last_verification
    if plan is None or plan.target is None or run is None or run.verdict == Run.Verdict.ERRORED:
        return None
    tier = facts.service.tier
    reasons = _verification_reasons(plan.target, run, tier, context.now)
    if not reasons:
        return None
    finished = run.finished_at or run.created_at
    age = (context.now - finished).days
    stale = run.verdict == Run.Verdict.PASSED
    return Finding(
        Kind.ROLLBACK_VERIFICATION,
        f"run:{run.pk}:{'stale' if stale else run.verdict}",
        f"Rollback target {plan.target.label}: {reasons[0].text}.",
        {
            "target": plan.target.label,
            "target_number": plan.target.number,
            "run": run.pk,
            "verdict": run.verdict,
            "finished_at": finished.isoformat(),
            "age_days": age,
            "limit_days": verification_limit_days(tier),
            "stale": stale,
            "plan_release": plan.release.pk if plan.release is not None else None,
        },
    )


def _expired_reports(facts: ServiceFacts, now: dt.datetime) -> list[tuple[LoadTestReport, str]]:
    newest = ledger_queries.newest_by_workload(facts.reports)
    found = []
    for report in newest.values():
        status = ledger_queries.evidence_status(report, now=now)
        if status.status == "stale":
            found.append((report, status.reason))
    return found


def evidence_expired(facts: ServiceFacts, context: SweepContext) -> Finding | None:
    """The newest load test of a workload class of the live revision is no longer current
    (too old for the tier, or measured on another fingerprint or hardware)."""
    expired = _expired_reports(facts, context.now)
    if not expired:
        return None
    live = facts.live
    return Finding(
        Kind.EVIDENCE_EXPIRED,
        f"revision:{live.pk}:reports:" + ",".join(str(r.pk) for r, _ in expired),
        f"Load-test evidence of live {live.label} expired: "
        + "; ".join(f"{report.workload}: {reason}" for report, reason in expired)
        + ".",
        {
            "revision": live.label,
            "revision_number": live.number,
            "reports": [
                {
                    "report": report.pk,
                    "workload": report.workload,
                    "measured_at": report.measured_at.isoformat(),
                    "reason": reason,
                }
                for report, reason in expired
            ],
            "max_age_days": ledger_queries.max_age_days(facts.service.tier),
        },
    )


def replay_regression(facts: ServiceFacts, context: SweepContext) -> Finding | None:
    """The newest run of a sample set on the live revision regressed against its baseline."""
    regressed = [run for run in facts.latest_runs if run.verdict == Run.Verdict.REGRESSED]
    if not regressed:
        return None
    live = facts.live
    return Finding(
        Kind.REPLAY_REGRESSION,
        "runs:" + ",".join(str(run.pk) for run in regressed),
        f"The latest replay of {', '.join(str(run.sample_set) for run in regressed)} on live "
        f"{live.label} regressed against its baseline (run "
        + ", ".join(f"#{run.pk}" for run in regressed)
        + ").",
        {
            "revision": live.label,
            "runs": [
                {
                    "run": run.pk,
                    "sample_set": str(run.sample_set),
                    "finished_at": run.finished_at.isoformat() if run.finished_at else None,
                    "baseline": run.baseline_id,
                    "reasons": [str(r) for r in (run.summary or {}).get("verdict_reasons") or []][
                        :5
                    ],
                }
                for run in regressed
            ],
        },
    )


def asset_deprecated(facts: ServiceFacts, context: SweepContext) -> Finding | None:
    asset = facts.live.model_asset
    if asset.lifecycle == ModelAsset.Lifecycle.ACTIVE:
        return None
    since = asset.deprecated_on if asset.lifecycle == "deprecated" else asset.retired_on
    return Finding(
        Kind.ASSET_DEPRECATED,
        f"asset:{asset.pk}:{asset.lifecycle}",
        f"The live model asset {asset} is {asset.lifecycle}"
        + (f" since {since:%Y-%m-%d}" if since else "")
        + ".",
        {
            "asset": asset.pk,
            "asset_label": str(asset),
            "lifecycle": asset.lifecycle,
            "since": since.isoformat() if since else None,
        },
    )


def engine_outdated(facts: ServiceFacts, context: SweepContext) -> Finding | None:
    """More than REVIEW_ENGINE_RELEASES_BEHIND versions of the live engine newer than the
    live one are in the registry (any runtime of any team)."""
    runtime = facts.live.runtime
    newer = newer_engine_versions(facts, context)
    limit = settings.REVIEW_ENGINE_RELEASES_BEHIND
    if len(newer) <= limit:
        return None
    return Finding(
        Kind.ENGINE_OUTDATED,
        f"engine:{runtime.engine}:{runtime.engine_version}:{newer[-1]}",
        f"The live engine {runtime.get_engine_display()} {runtime.engine_version} is "
        f"{len(newer)} releases behind the newest the registry knows ({newer[-1]}; "
        f"newer: {', '.join(newer)}); the limit is {limit}.",
        {
            "engine": runtime.engine,
            "runtime": runtime.name,
            "version": runtime.engine_version,
            "newest": newer[-1],
            "newer": newer,
            "behind": len(newer),
            "limit": limit,
        },
    )


# ---------------------------------------------------------------- cost and quotas

CENT = Decimal("0.01")


@dataclass(frozen=True)
class CostWindow:
    """The live revision's cost over the recent window: measured, and expected at release."""

    first: dt.date
    last: dt.date
    days: int  # priced days served by the live revision that carry output tokens
    measured: Decimal | None  # per million output tokens, idle capacity included
    baseline: Decimal | None  # per million output tokens, expected at release
    currency: str
    output_tokens_per_s: float | None  # the throughput the baseline is priced at
    price_per_gpu_hour: Decimal | None  # the newest measured day's

    @property
    def increase_pct(self) -> Decimal | None:
        """How far the measured cost is above the baseline, of the figures shown (cents)."""
        if self.measured is None or not self.baseline:
            return None
        return ((self.measured / self.baseline - 1) * 100).quantize(Decimal("0.1"))


def live_throughput(facts: ServiceFacts) -> float | None:
    """The output tokens per second the live revision's newest load test measured (of
    those that measured one): the throughput `releases.cost` prices a revision at."""
    measured = [r for r in facts.reports if r.output_tokens_per_s is not None]
    if not measured:
        return None
    return max(measured, key=lambda r: (r.measured_at, r.pk)).output_tokens_per_s


def cost_window(facts: ServiceFacts, today: dt.date) -> CostWindow:
    """The last DRIFT_WINDOW_DAYS full days the live revision served, as the cost pages
    price them (`releases.cost.report.build_report` of `cost_days`).

    *Measured*: those days' cost, idle capacity included, over their output tokens.
    *Baseline*: the live revision's expected cost per million output tokens, as
    `releases.cost.release_cost` computes it (its GPUs per replica over the output tokens
    per second its newest load test measured, priced per GPU-hour). It is the cost the
    release was approved on (the release page shows it beside the candidate's), the one
    number known before the revision served; its own first weeks could have drifted
    already. It is priced at each measured day's price sheet, weighted by the day's output
    tokens (exactly release_cost's figure while the price does not change), so that a new
    price sheet moves both sides and is no drift: what drifts is GPU-hours per token."""
    window = recent_window(facts, today)
    live = facts.live
    served = [
        day
        for day in facts.cost_days
        if day.served_by.revision_id == live.pk and window.first <= day.date <= window.last
    ]
    report = build_report(served, window.first, window.last)
    tokens = {day.date: day.output_tokens for day in report.days if day.output_tokens}
    priced = [
        day
        for day in served
        if day.priced and day.currency == report.currency and day.date in tokens
    ]
    throughput = live_throughput(facts)
    hours = ledger_queries.gpu_hours_per_million(live.runtime.gpu_count, throughput)
    baseline = None
    if hours is not None and priced:
        spent = sum((day.price_per_gpu_hour or Decimal(0)) * tokens[day.date] for day in priced)
        price = Decimal(spent) / sum(tokens[day.date] for day in priced)
        baseline = (Decimal(str(hours)) * price).quantize(CENT)
    return CostWindow(
        first=window.first,
        last=window.last,
        days=len(priced),
        measured=report.total.per_million_output_tokens if priced else None,
        baseline=baseline,
        currency=report.currency,
        output_tokens_per_s=throughput,
        price_per_gpu_hour=priced[-1].price_per_gpu_hour if priced else None,
    )


def cost_drift_limit(tier: str) -> int:
    limits = policy.COST_DRIFT_MAX_PCT
    return limits.get(tier, min(limits.values()))


def _money(value: Decimal | None, currency: str) -> str:
    return "—" if value is None else f"{value:,.2f} {currency}".strip()


def cost_drift(facts: ServiceFacts, context: SweepContext) -> Finding | None:
    """The live revision's 7-day cost per million output tokens (idle capacity included)
    more than `policy.COST_DRIFT_MAX_PCT[tier]` % above its expected cost at release
    (`cost_window` says why that is the baseline), judged on at least
    `policy.COST_DRIFT_MIN_DAYS` priced days with output tokens. Nothing is said when
    either figure is unknown (no price sheet, no throughput measured)."""
    cost = cost_window(facts, context.today)
    increase = cost.increase_pct
    if cost.days < policy.COST_DRIFT_MIN_DAYS or increase is None:
        return None
    tier = facts.service.tier
    limit = cost_drift_limit(tier)
    if increase <= limit:
        return None
    live = facts.live
    gpus = live.runtime.gpu_count
    return Finding(
        Kind.COST_DRIFT,
        f"revision:{live.pk}",
        f"7-day cost per million output tokens {_money(cost.measured, cost.currency)} "
        f"({cost.days} priced days of {live.label} to {cost.last:%Y-%m-%d}, idle capacity "
        f"included) is {increase:.0f} % above the {_money(cost.baseline, cost.currency)} "
        f"expected at release ({cost.output_tokens_per_s:,.0f} output tokens/s on {gpus} GPU "
        f"at {_money(cost.price_per_gpu_hour, cost.currency)} per GPU-hour); the limit for "
        f"{tier} services is {limit} %.",
        {
            "cost_per_million_7d": float(cost.measured or 0),
            "baseline_per_million": float(cost.baseline or 0),
            "currency": cost.currency,
            "increase_pct": float(increase),
            "limit_pct": limit,
            "days": cost.days,
            "window_first": cost.first.isoformat(),
            "window_last": cost.last.isoformat(),
            "output_tokens_per_s": cost.output_tokens_per_s,
            "gpu_count": gpus,
            "price_per_gpu_hour": float(cost.price_per_gpu_hour or 0),
            "revision": live.label,
            "revision_number": live.number,
        },
    )


def tenants_under_pressure(facts: ServiceFacts) -> list[tuple[str, dict[dt.date, int]]]:
    """The tenants rate-limited on at least `policy.QUOTA_PRESSURE_MIN_DAYS` days of the
    recent window, by name, each with its hits a day."""
    least = policy.QUOTA_PRESSURE_MIN_DAYS
    return [
        (tenant, dict(sorted(days.items())))
        for tenant, days in sorted(facts.rate_limit_hits.items())
        if len(days) >= least
    ]


def tenant_entry(facts: ServiceFacts, tenant: str) -> dict[str, Any] | None:
    """The tenant's entry in the gateway policy in force (the live revision's version),
    or None: not listed, or the version is known by name only."""
    document = facts.live.gateway_policy.document
    entries = document.get("tenants") if isinstance(document, dict) else None
    for entry in entries or []:
        if isinstance(entry, dict) and entry.get("name") == tenant:
            return entry
    return None


def tenant_entry_url(facts: ServiceFacts, in_force: GatewayPolicy, tenant: str) -> str:
    """The tenant's row on the page of the policy version in force."""
    url = reverse("releases:gateway_policy_version", args=[facts.service.slug, in_force.version])
    return f"{url}#tenant-{tenant}"


def _quota_words(in_force: GatewayPolicy, entry: dict[str, Any] | None) -> str:
    if entry is None:
        if in_force.document is None:
            return (
                f"no entry in the gateway policy: {in_force.label}, in force, is recorded by "
                "name only"
            )
        return f"no entry in the gateway policy in force ({in_force.label})"
    said = [
        f"{entry[name]:,} {name}" if isinstance(entry.get(name), int) else f"no {name}"
        for name in ("rpm", "tpm")
    ]
    return f"{' and '.join(said)} in gateway policy {in_force.label}"


def _hits_words(days: dict[dt.date, int]) -> str:
    return ", ".join(f"{day:%Y-%m-%d} {hits:,}" for day, hits in days.items())


def quota_pressure(facts: ServiceFacts, context: SweepContext) -> list[Finding]:
    """One finding per tenant whose calls the gateway refused for its rate limit on at
    least `policy.QUOTA_PRESSURE_MIN_DAYS` of the last DRIFT_WINDOW_DAYS full days (the
    gateway summaries' breakdown rows)."""
    window = recent_window(facts, context.today)
    in_force = facts.live.gateway_policy
    least = policy.QUOTA_PRESSURE_MIN_DAYS
    found = []
    for tenant, days in tenants_under_pressure(facts):
        entry = tenant_entry(facts, tenant)
        total = sum(days.values())
        found.append(
            Finding(
                Kind.QUOTA_PRESSURE,
                f"tenant:{tenant}",
                f"Tenant {tenant} hit its rate limit on {len(days)} of the last "
                f"{DRIFT_WINDOW_DAYS} days to {window.last:%Y-%m-%d} ({_hits_words(days)}: "
                f"{total:,} calls refused); its quota: {_quota_words(in_force, entry)}. The "
                f"limit is {least} days.",
                {
                    "tenant": tenant,
                    "days": len(days),
                    "min_days": least,
                    "window_first": window.first.isoformat(),
                    "window_last": window.last.isoformat(),
                    "hits": total,
                    "hits_by_day": {day.isoformat(): hits for day, hits in days.items()},
                    "policy": in_force.label,
                    "policy_version": in_force.version,
                    "in_policy": entry is not None,
                    "rpm": entry.get("rpm") if entry else None,
                    "tpm": entry.get("tpm") if entry else None,
                },
            )
        )
    return found


RULES = (
    cadence,
    latency_drift,
    error_rate_drift,
    license_change,
    rollback_verification,
    evidence_expired,
    replay_regression,
    asset_deprecated,
    engine_outdated,
    cost_drift,
)
# Rules that find one occurrence each (a tenant), as many as there are.
RULES_PER_OCCURRENCE = (quota_pressure,)


def findings_of(facts: ServiceFacts, context: SweepContext) -> list[Finding]:
    """Every trigger that holds for the service now."""
    found = [finding for rule in RULES if (finding := rule(facts, context)) is not None]
    for many in RULES_PER_OCCURRENCE:
        found.extend(many(facts, context))
    return found


# ---------------------------------------------------------------- the checklist


def _versions(facts: ServiceFacts, context: SweepContext) -> ItemPrefill:
    live, asset, runtime = facts.live, facts.live.model_asset, facts.live.runtime
    newer = newer_engine_versions(facts, context)
    limit = settings.REVIEW_ENGINE_RELEASES_BEHIND
    flags = []
    if asset.lifecycle != ModelAsset.Lifecycle.ACTIVE:
        flags.append(f"the model asset is {asset.lifecycle}")
    if len(newer) > limit:
        flags.append(f"the engine is {len(newer)} releases behind the newest known ({newer[-1]})")
    since = asset.deprecated_on or asset.retired_on
    return ItemPrefill(
        Key.VERSIONS,
        [
            _fact(
                "Model asset",
                f"{asset} ({asset.lifecycle}" + (f" since {since:%Y-%m-%d})" if since else ")"),
                reverse("ledger:asset_detail", args=[asset.pk]),
            ),
            _fact(
                "Engine",
                f"{runtime.get_engine_display()} {runtime.engine_version} on {runtime.name}",
                reverse("ledger:runtime_detail", args=[runtime.name]),
            ),
            _fact(
                "Newer engine versions in the registry",
                ", ".join(newer) if newer else "none: the live version is the newest known",
            ),
            _fact("Live revision", live.label, revision_url(live, facts.service)),
        ],
        flags,
    )


def _license(facts: ServiceFacts, context: SweepContext) -> ItemPrefill:
    service, asset = facts.service, facts.live.model_asset
    license_ = asset.license
    problems = ledger_queries.license_problems(
        asset,
        accepted=facts.license_accepted,
        pending_severity="breach" if service.tier == Service.Tier.PRODUCTION else "warning",
    )
    flags = [problem.message for problem in problems]
    if service.exposure not in ledger_queries.ALLOWED_EXPOSURES[license_.kind]:
        flags.append(
            f"{license_.spdx_id} ({license_.get_kind_display().lower()}) may not be served at "
            f"this service's exposure ({service.get_exposure_display().lower()})"
        )
    flags.extend(
        f"event #{change.sequence} on {_day(change.at)}: {_license_words(change)}"
        for change in facts.license_changes
    )
    return ItemPrefill(
        Key.LICENSE,
        [
            _fact(
                "License",
                f"{license_.spdx_id} ({license_.get_kind_display().lower()}), "
                f"{asset.get_license_approval_display().lower()}",
                reverse("ledger:asset_detail", args=[asset.pk]),
            ),
            _fact(
                "Gated terms",
                ("accepted" if facts.license_accepted else "not accepted")
                if license_.gated
                else "not gated",
            ),
            _fact("Weights source", asset.source_repository),
            _fact("Weights digest", asset.weights_digest),
            _fact("Exposure", service.get_exposure_display()),
            _fact(
                "License changes while live",
                str(len(facts.license_changes)) if facts.license_changes else "none",
            ),
        ],
        flags,
    )


def _sample_sets(facts: ServiceFacts, context: SweepContext) -> ItemPrefill:
    served = sorted(task.slug for task in facts.service.task_types.all())
    covered: set[str] = set()
    facts_list = [_fact("Task types served", ", ".join(served) or "none declared")]
    for run in facts.latest_runs:
        tags = facts.set_tags.get(run.sample_set_id, set())
        covers = sorted(tags & set(served))
        covered.update(covers)
        facts_list.append(
            _fact(
                f"Sample set {run.sample_set}",
                f"latest run #{run.pk} {run.verdict}"
                + (f" on {_day(run.finished_at)}" if run.finished_at else "")
                + (f"; covers {', '.join(covers)}" if covers else "; covers no task type served"),
                run_url(run),
            )
        )
    flags = []
    if not facts.latest_runs:
        flags.append(f"no sample set has been replayed on live {facts.live.label}")
    missing = [task for task in served if task not in covered]
    if missing:
        flags.append("task types without a sample set: " + ", ".join(missing))
    return ItemPrefill(Key.SAMPLE_SETS, facts_list, flags)


def _cost_latency(facts: ServiceFacts, context: SweepContext) -> ItemPrefill:
    service, live = facts.service, facts.live
    window = recent_window(facts, context.today)
    p95 = weighted_ttft_p95(window.days)
    rate, requests = error_rate_pct(window.days)
    week = first_week(facts, window.first)
    week_rate, _ = error_rate_pct(week)
    report = baseline_report(facts)
    timeouts, timed = timeout_rate_pct(window.days)
    timeout_slo = service.slo_timeout_rate_pct
    listed = [
        _fact(
            "7-day p95 TTFT (run evidence)",
            f"{_ms(p95)} against an SLO of {_ms(service.slo_ttft_p95_ms)}"
            if service.slo_ttft_p95_ms
            else _ms(p95),
        ),
        _fact(
            "7-day error rate (run evidence)",
            f"{_pct(rate)} of {requests:,} requests"
            + (
                f" against an SLO of {_pct(float(service.slo_error_rate_pct))}"
                if service.slo_error_rate_pct is not None
                else ""
            ),
        ),
        _fact(
            "7-day timeout rate (run evidence)",
            (
                f"{_pct(timeouts)} of {timed:,} requests"
                if timeouts is not None
                else "not counted: the gateway's days say nothing of timeouts"
            )
            + (f" against an SLO of {_pct(float(timeout_slo))}" if timeout_slo is not None else ""),
        ),
        _fact(
            f"Error rate of {live.label}'s first week",
            _pct(week_rate)
            + (f" ({_day(week[0]['date'])} to {_day(week[-1]['date'])})" if week else ""),
        ),
        _fact(
            "Requests a day (7-day mean)",
            f"{requests / max(len(window.days), 1):,.0f}" if requests else "—",
        ),
    ]
    if report is not None:
        cost = ledger_queries.gpu_hours_per_million(
            live.runtime.gpu_count, report.output_tokens_per_s
        )
        listed.extend(
            [
                _fact(
                    "Baseline at release",
                    f"{report.workload} load test of {_day(report.measured_at)}: p95 TTFT "
                    f"{_ms(report.ttft_p95_ms)}, p95 TPOT {_ms(report.tpot_p95_ms)}, error "
                    f"rate {_pct(report.error_rate * 100 if report.error_rate is not None else None)}",
                    report_url(report, service, live),
                ),
                _fact(
                    "Cost at release",
                    f"{cost:.2f} GPU-hours per million output tokens "
                    f"({report.output_tokens_per_s:,.0f} tokens/s on {live.runtime.gpu_count} GPU)"
                    if cost is not None and report.output_tokens_per_s
                    else "not measured (no throughput in the baseline report)",
                ),
            ]
        )
    else:
        listed.append(_fact("Baseline at release", f"no load test of {live.label}"))
    spend = cost_window(facts, context.today)
    cost_url = reverse("releases:service_cost", args=[service.slug]) + f"?days={DRIFT_WINDOW_DAYS}"
    listed.extend(
        [
            _fact(
                "7-day cost per million output tokens (measured)",
                f"{_money(spend.measured, spend.currency)} over {spend.days} priced days of "
                f"{live.label} with output tokens, idle capacity included"
                if spend.measured is not None
                else f"unknown: no priced day of {live.label} with output tokens",
                cost_url,
            ),
            _fact(
                "Cost per million output tokens expected at release",
                f"{_money(spend.baseline, spend.currency)} ({spend.output_tokens_per_s:,.0f} "
                f"output tokens/s on {live.runtime.gpu_count} GPU at "
                f"{_money(spend.price_per_gpu_hour, spend.currency)} per GPU-hour)"
                if spend.baseline is not None and spend.output_tokens_per_s is not None
                else "unknown: "
                + (
                    "no load test measured a throughput"
                    if spend.output_tokens_per_s is None
                    else "no price sheet in force for a day served"
                ),
            ),
            _fact(
                "Cost drift allowed",
                f"{cost_drift_limit(service.tier)} % ({service.tier}), on at least "
                f"{policy.COST_DRIFT_MIN_DAYS} priced days",
            ),
        ]
    )
    flags = [
        finding.summary
        for finding in (
            latency_drift(facts, context),
            error_rate_drift(facts, context),
            cost_drift(facts, context),
        )
        if finding is not None
    ]
    if p95 is None:
        flags.append(
            f"fewer than {DRIFT_MIN_DAYS} of the last {DRIFT_WINDOW_DAYS} days have run evidence"
        )
    if report is None:
        flags.append(f"no load test of {live.label} to compare against")
    # Timeouts are measured on real traffic (the gateway counts them); load tests do not
    # record them, so this is where the timeout SLO is judged.
    if timeout_slo is not None and timeouts is not None and timeouts > float(timeout_slo):
        flags.append(
            f"7-day timeout rate {_pct(timeouts)} is above the SLO of {_pct(float(timeout_slo))}"
        )
    return ItemPrefill(Key.COST_LATENCY, listed, flags)


def _rollback_target(facts: ServiceFacts, context: SweepContext) -> ItemPrefill:
    plan, run = facts.plan, facts.last_verification
    service = facts.service
    if plan is None or plan.target is None:
        return ItemPrefill(
            Key.ROLLBACK_TARGET,
            [_fact("Target", "none: no plan names one and no earlier revision has served")],
            ["there is no rollback target"],
        )
    target = plan.target
    reasons = _verification_reasons(target, run, service.tier, context.now)
    listed = [
        _fact("Target", target.label, revision_url(target, service)),
        _fact(
            "Named by",
            f"release #{plan.release.pk}'s rollback plan"
            if plan.release is not None
            else "nothing: it is the revision that served before",
            reverse("releases:release_detail", args=[plan.release.pk]) if plan.release else "",
        ),
        _fact(
            "Last verification",
            f"run #{run.pk} ({run.sample_set}) {run.verdict}"
            + (f" on {_day(run.finished_at)}" if run.finished_at else "")
            if run is not None
            else "never verified",
            run_url(run) if run is not None else "",
        ),
        _fact(
            "Re-verify within",
            f"{verification_limit_days(service.tier)} days ({service.tier})",
        ),
    ]
    return ItemPrefill(Key.ROLLBACK_TARGET, listed, [reason.text for reason in reasons])


def _capabilities(facts: ServiceFacts, context: SweepContext) -> ItemPrefill:
    live = facts.live
    listed, flags = [], []
    for capability in facts.capabilities:
        status = capability.status
        when = f" on {_day(capability.verified_at)}" if capability.verified_at else ""
        other = (
            status == Capability.Status.VERIFIED
            and capability.verified_fingerprint
            and capability.verified_fingerprint != live.fingerprint
        )
        listed.append(
            _fact(
                capability.get_kind_display(),
                f"{status}{when}" + (" (on another fingerprint)" if other else ""),
            )
        )
        if status == Capability.Status.FAILED:
            flags.append(f"{capability.get_kind_display()} failed its check{when}")
        elif other:
            flags.append(f"{capability.get_kind_display()} was verified on another fingerprint")
    declared = [c for c in facts.capabilities if c.status == Capability.Status.DECLARED]
    if declared:
        flags.append(
            f"{len(declared)} of {len(facts.capabilities)} capability claims were never verified"
        )
    if not facts.capabilities:
        flags.append(f"{live.label} declares no capability")
    listed.append(_fact("Revision", live.label, revision_url(live, facts.service)))
    return ItemPrefill(Key.CAPABILITIES, listed, flags)


def _evidence(facts: ServiceFacts, context: SweepContext) -> ItemPrefill:
    service, live = facts.service, facts.live
    newest = ledger_queries.newest_by_workload(facts.reports)
    listed, flags = [], []
    for workload, report in newest.items():
        status = ledger_queries.evidence_status(report, now=context.now)
        listed.append(
            _fact(
                f"{workload} load test",
                f"{status.status}, measured {_day(report.measured_at)}"
                + (f": {status.reason}" if status.reason else ""),
                report_url(report, service, live),
            )
        )
        if status.status != "current":
            flags.append(f"{workload} evidence is {status.status}")
    served = (task.slug for task in service.task_types.all())
    needed = policy.required_workloads(service.tier, served)
    missing = [w for w, by in needed.items() if not by and w not in newest]
    if missing:
        flags.append(f"no {', '.join(missing)} load test, which {service.tier} services need")
    for workload, task_types in needed.items():
        if task_types and workload not in newest:
            flags.append(
                f"no {workload} load test, which {service.tier} services serving "
                f"{', '.join(task_types)} need"
            )
    if not newest:
        listed.append(_fact("Load tests", f"none attached to {live.label}"))
    listed.append(
        _fact("Maximum age", f"{ledger_queries.max_age_days(service.tier)} days ({service.tier})")
    )
    return ItemPrefill(Key.EVIDENCE, listed, flags)


def _quotas(facts: ServiceFacts, context: SweepContext) -> ItemPrefill | None:
    """For FinOps and the business owner, when a tenant is under quota pressure: reconfirm
    each such tenant's quota, with its days and hits and its entry in the policy in force."""
    pressed = tenants_under_pressure(facts)
    if not pressed:
        return None
    window = recent_window(facts, context.today)
    in_force = facts.live.gateway_policy
    listed, flags = [], []
    for tenant, days in pressed:
        entry = tenant_entry(facts, tenant)
        listed.extend(
            [
                _fact(
                    f"Tenant {tenant}: days rate-limited",
                    f"{len(days)} of the last {DRIFT_WINDOW_DAYS} days to "
                    f"{window.last:%Y-%m-%d}, {sum(days.values()):,} calls refused: "
                    + _hits_words(days),
                ),
                _fact(
                    f"Tenant {tenant}: quota in force",
                    _quota_words(in_force, entry),
                    tenant_entry_url(facts, in_force, tenant) if entry is not None else "",
                ),
            ]
        )
        flags.append(
            f"reconfirm the quota of tenant {tenant}: rate-limited on {len(days)} of the last "
            f"{DRIFT_WINDOW_DAYS} days"
        )
    listed.append(
        _fact(
            "Reconfirmed by",
            "FinOps and the business owner: keep each quota, or record a gateway policy "
            "version that changes it",
            reverse("releases:gateway_policy", args=[facts.service.slug]),
        )
    )
    return ItemPrefill(Key.QUOTA_RECONFIRMATION, listed, flags)


# Each builds an item, or None when the item does not apply to the service now (an
# open review gets such an item when it applies later: `raise_review`).
CHECKLIST: tuple[Callable[[ServiceFacts, SweepContext], ItemPrefill | None], ...] = (
    _versions,
    _license,
    _sample_sets,
    _cost_latency,
    _rollback_target,
    _capabilities,
    _evidence,
    _quotas,  # last: an open review it joins later gets it at the same place
)


def checklist_of(facts: ServiceFacts, context: SweepContext) -> list[ItemPrefill]:
    """The checklist, in order, each item with the facts and links found."""
    return [item for build in CHECKLIST if (item := build(facts, context)) is not None]
