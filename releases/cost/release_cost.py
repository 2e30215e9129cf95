"""What a release costs per million output tokens: expected from the load tests of the
live revision and of the candidate, and, once released, as measured.

**Expected**: a revision's GPUs per replica over the output tokens per second its newest
load test measured (`ledger.queries.gpu_hours_per_million`), at the price sheet in force
today for its GPU model: what a million output tokens cost at that throughput, the GPUs
fully busy. **Measured**: the candidate's days of run evidence since the release
reached 100 % (at most `MEASURED_DAYS`), their cost (idle capacity included) over their
output tokens, from the stored cost (`stored_cost_days`).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal

from django.utils import timezone

from ledger.models import Revision
from ledger.queries import gpu_hours_per_million
from releases.cost.queries import Prices, newest_throughputs, stored_cost_days
from releases.cost.report import build_report
from releases.models import Release

MEASURED_DAYS = 30


@dataclass(frozen=True)
class Expected:
    revision: str
    gpu_model: str
    output_tokens_per_s: float | None
    per_million: Decimal | None  # to the cent; None: no throughput measured, or no price
    currency: str
    exact_per_million: Decimal | None = None  # unrounded, for the change between two


@dataclass(frozen=True)
class ReleaseCost:
    live: Expected | None
    candidate: Expected
    measured_per_million: Decimal | None
    measured_days: int
    measured_currency: str
    released: bool  # whether there is a measured cost to speak of

    @property
    def change_pct(self) -> float | None:
        """The candidate's expected cost against the live one's, in percent."""
        live = self.live.exact_per_million if self.live is not None else None
        candidate = self.candidate.exact_per_million
        if not live or candidate is None:
            return None
        return float((candidate / live - 1) * 100)


def _expected(
    revision: Revision, throughputs: dict[int, float], prices: Prices, today: dt.date
) -> Expected:
    runtime = revision.runtime
    tokens_per_s = throughputs.get(revision.pk)
    hours = gpu_hours_per_million(runtime.gpu_count, tokens_per_s)
    price = prices.in_force(runtime.gpu_model, today) if runtime.gpu_model else None
    exact = None
    if hours is not None and price is not None:
        exact = Decimal(str(hours)) * price[0]
    return Expected(
        revision.label,
        runtime.gpu_model,
        tokens_per_s,
        exact.quantize(Decimal("0.01")) if exact is not None else None,
        price[1] if price else "",
        exact,
    )


def release_cost(release: Release) -> ReleaseCost:
    today = timezone.now().astimezone(dt.UTC).date()
    live_revision = release.from_revision
    revisions = [release.to_revision] + ([live_revision] if live_revision is not None else [])
    throughputs = newest_throughputs(r.pk for r in revisions)
    prices = Prices({r.runtime.gpu_model for r in revisions if r.runtime.gpu_model})
    candidate = _expected(release.to_revision, throughputs, prices, today)
    live = (
        _expected(live_revision, throughputs, prices, today) if live_revision is not None else None
    )
    measured, days, currency = None, 0, ""
    released = release.state == Release.State.RELEASED and release.closed_at is not None
    if released:
        assert release.closed_at is not None
        since = release.closed_at.astimezone(dt.UTC).date()
        until = min(since + dt.timedelta(days=MEASURED_DAYS - 1), today - dt.timedelta(days=1))
        if until >= since:
            served = [
                day
                for day in stored_cost_days(since, until, [release.service.slug])
                if day.served_by.revision_id == release.to_revision_id
            ]
            report = build_report(served, since, until)
            measured = report.total.per_million_output_tokens
            days, currency = len(report.days), report.currency
    return ReleaseCost(live, candidate, measured, days, currency, released)
