"""A service's day of GPU cost split over its tenants and task types, to the cent.

Pure: numbers in, lines out; no database. `releases.cost.queries` reads the day's
rows, the price and the capacity, and calls `split_day`.

**The day's cost.** GPU-hours = replicas * GPUs per replica * 24, priced at the price
sheet in force that day (`ledger.models.PriceSheet`). Rounded once, to the cent.

**Idle capacity.** What the day's output tokens would have taken at the throughput the
revision's load test measured (`output_tokens_per_s` per replica) is the *used* share of
the GPU-hours; the rest is idle and is its own line, never spread over the tenants. When
no load test measured a throughput the used share is unknown: every GPU-hour is split
over the tenants and the day says so (`DaySplit.capacity_known`).

**The key** (`AllocationKey`): the used share is split in proportion to each row's
output tokens (the default), or to its request-seconds, a row's requests * its p50 TTFT
plus its output tokens * its p50 TPOT. A day where a row lacks either p50 cannot be
split by request-seconds and falls back to output tokens (`DaySplit.key` says which).
A day without output tokens is split by requests.

**To the cent.** The cents of the day are handed out by the largest remainder (Hamilton)
method: each part gets the floor of its exact share, and the cents left over go to the
largest fractional remainders (ties by the order of the rows). So the parts add up to
the day's cost exactly, and no part is more than a cent from its exact share.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction

HOURS_A_DAY = 24
CENT = Decimal("0.01")
IDLE = "idle"


class AllocationKey(enum.StrEnum):
    OUTPUT_TOKENS = "output_tokens"
    REQUEST_SECONDS = "request_seconds"
    REQUESTS = "requests"  # the fallback of a day without output tokens


@dataclass(frozen=True)
class Usage:
    """One breakdown row, as the split reads it."""

    tenant: str
    task_type: str
    requests: int
    output_tokens: int
    ttft_p50_ms: float | None = None
    tpot_p50_ms: float | None = None

    @property
    def request_seconds(self) -> Fraction | None:
        if self.ttft_p50_ms is None or self.tpot_p50_ms is None:
            return None
        milliseconds = Fraction(self.requests) * Fraction(self.ttft_p50_ms) + Fraction(
            self.output_tokens
        ) * Fraction(self.tpot_p50_ms)
        return milliseconds / 1000


@dataclass(frozen=True)
class Part:
    tenant: str  # IDLE for the idle line
    task_type: str  # "" for the idle line
    gpu_hours: Fraction
    cost: Decimal


@dataclass(frozen=True)
class DaySplit:
    gpu_hours: Fraction
    cost: Decimal
    used_share: Fraction  # of the GPU-hours; 1 when the capacity is unknown
    capacity_known: bool
    key: AllocationKey
    parts: tuple[Part, ...]


def day_gpu_hours(replicas: int, gpus_per_replica: int) -> int:
    return max(replicas, 1) * max(gpus_per_replica, 1) * HOURS_A_DAY


def day_cost(gpu_hours: int, price_per_gpu_hour: Decimal) -> Decimal:
    return (gpu_hours * price_per_gpu_hour).quantize(CENT, rounding=ROUND_HALF_EVEN)


def used_share(
    output_tokens: int, output_tokens_per_s: float | None, replicas: int
) -> Fraction | None:
    """The part of the day's capacity the output tokens took; None when unknown."""
    if not output_tokens_per_s or output_tokens_per_s <= 0:
        return None
    capacity = Fraction(output_tokens_per_s) * max(replicas, 1) * HOURS_A_DAY * 3600
    return min(Fraction(output_tokens) / capacity, Fraction(1))


def split_cents(total: Decimal, weights: Sequence[Fraction]) -> list[Decimal]:
    """`total` (whole cents) in parts proportional to `weights`, adding up to it exactly.

    All-zero weights split evenly; no weights is an error (the cost would be lost)."""
    if not weights:
        raise ValueError("nothing to split the cost over")
    cents = int((total / CENT).to_integral_value())
    if cents < 0:
        raise ValueError(f"a cost cannot be negative; got {total}")
    if any(weight < 0 for weight in weights):
        raise ValueError("a weight cannot be negative")
    whole = sum(weights, Fraction(0))
    shares = (
        [Fraction(cents) * weight / whole for weight in weights]
        if whole
        else [Fraction(cents, len(weights))] * len(weights)
    )
    floors = [share.numerator // share.denominator for share in shares]
    left = cents - sum(floors)
    by_remainder = sorted(range(len(shares)), key=lambda i: (-(shares[i] - floors[i]), i))
    for index in by_remainder[:left]:
        floors[index] += 1
    return [Decimal(part) * CENT for part in floors]


def _weights(rows: Sequence[Usage], key: AllocationKey) -> tuple[AllocationKey, list[Fraction]]:
    if key is AllocationKey.REQUEST_SECONDS:
        seconds = [row.request_seconds for row in rows]
        if all(value is not None for value in seconds) and any(seconds):
            return key, [value for value in seconds if value is not None]
    if any(row.output_tokens for row in rows):
        return AllocationKey.OUTPUT_TOKENS, [Fraction(row.output_tokens) for row in rows]
    return AllocationKey.REQUESTS, [Fraction(row.requests) for row in rows]


def split_day(
    rows: Sequence[Usage],
    *,
    gpu_hours: int,
    price_per_gpu_hour: Decimal,
    output_tokens_per_s: float | None,
    replicas: int,
    key: AllocationKey = AllocationKey.OUTPUT_TOKENS,
) -> DaySplit:
    """The day's cost in parts: one per (tenant, task type), in the order they first
    appear in `rows` (a tenant's task type served by two backends is one part), and the
    idle line last, even when it is 0, so that every service-day has one. A day without
    rows is idle entirely."""
    total = day_cost(gpu_hours, price_per_gpu_hour)
    hours = Fraction(gpu_hours)
    measured = used_share(sum(row.output_tokens for row in rows), output_tokens_per_s, replicas)
    share = Fraction(0) if not rows else (Fraction(1) if measured is None else measured)
    used_key, weights = _weights(rows, key) if rows else (key, [])
    whole = sum(weights, Fraction(0))
    grouped: dict[tuple[str, str], Fraction] = {}
    for row, weight in zip(rows, weights, strict=True):
        part_key = (row.tenant, row.task_type)
        # Rows without requests or tokens at all share the used part evenly.
        grouped[part_key] = grouped.get(part_key, Fraction(0)) + (
            share * weight / whole if whole else share / len(rows)
        )
    cents = split_cents(total, [*grouped.values(), 1 - share])
    parts = [
        Part(tenant, task_type, hours * weight, cost)
        for ((tenant, task_type), weight), cost in zip(grouped.items(), cents, strict=False)
    ]
    parts.append(Part(IDLE, "", hours * (1 - share), cents[-1]))
    return DaySplit(hours, total, share, measured is not None, used_key, tuple(parts))
