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
import math
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
    # output_tokens / (output_tokens_per_s * replicas * a day's seconds), at most 1, as
    # one Fraction built from integers (the throughput's exact binary value).
    rate = Fraction(output_tokens_per_s)
    capacity = rate.numerator * max(replicas, 1) * HOURS_A_DAY * 3600
    used = output_tokens * rate.denominator
    if used >= capacity:
        return Fraction(1)
    return Fraction(used, capacity)


def split_cents(total: Decimal, weights: Sequence[Fraction]) -> list[Decimal]:
    """`total` (whole cents) in parts proportional to `weights`, adding up to it exactly.

    All-zero weights split evenly; no weights is an error (the cost would be lost).

    In integers: the weights brought to a common denominator, each part's exact share
    `cents * weight / whole` is a floor and a remainder out of `whole`, and remainders
    out of the same `whole` compare as the fractions they are."""
    if not weights:
        raise ValueError("nothing to split the cost over")
    cents = int((total / CENT).to_integral_value())
    if cents < 0:
        raise ValueError(f"a cost cannot be negative; got {total}")
    ratios = [weight.as_integer_ratio() for weight in weights]
    if any(numerator < 0 for numerator, _ in ratios):
        raise ValueError("a weight cannot be negative")
    common = math.lcm(*(denominator for _, denominator in ratios))
    scaled = [numerator * (common // denominator) for numerator, denominator in ratios]
    whole = sum(scaled)
    if whole:
        divided = [divmod(cents * weight, whole) for weight in scaled]
    else:
        divided = [divmod(cents, len(weights))] * len(weights)
    floors = [floor for floor, _ in divided]
    left = cents - sum(floors)
    by_remainder = sorted(range(len(divided)), key=lambda i: (-divided[i][1], i))
    for index in by_remainder[:left]:
        floors[index] += 1
    return [Decimal(part) * CENT for part in floors]


def _exact(value: int) -> Fraction | int:
    return value if isinstance(value, int) else Fraction(value)


def _weights(
    rows: Sequence[Usage], key: AllocationKey
) -> tuple[AllocationKey, list[Fraction | int]]:
    """Each row's weight: Fractions of request-seconds, or whole numbers of tokens or
    requests (kept as ints: exact, and cheaper to add than Fractions)."""
    if key is AllocationKey.REQUEST_SECONDS:
        seconds = [row.request_seconds for row in rows]
        if all(value is not None for value in seconds) and any(seconds):
            return key, [value for value in seconds if value is not None]
    if any(row.output_tokens for row in rows):
        return AllocationKey.OUTPUT_TOKENS, [_exact(row.output_tokens) for row in rows]
    return AllocationKey.REQUESTS, [_exact(row.requests) for row in rows]


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
    # A part's weight is the sum of its rows' (exact), its share of the used part
    # share * weight / whole, each Fraction built once from integers.
    summed: dict[tuple[str, str], Fraction | int] = {}
    counted: dict[tuple[str, str], int] = {}
    for row, weight in zip(rows, weights, strict=True):
        part_key = (row.tenant, row.task_type)
        summed[part_key] = summed.get(part_key, 0) + weight
        counted[part_key] = counted.get(part_key, 0) + 1
    whole = sum(summed.values())
    share_n, share_d = share.numerator, share.denominator
    grouped: dict[tuple[str, str], Fraction] = {}
    for part_key, weight in summed.items():
        if whole:
            grouped[part_key] = Fraction(
                share_n * weight.numerator * whole.denominator,
                share_d * weight.denominator * whole.numerator,
            )
        else:
            # Rows without requests or tokens at all share the used part evenly.
            grouped[part_key] = Fraction(share_n * counted[part_key], share_d * len(rows))
    idle = Fraction(share_d - share_n, share_d)
    cents = split_cents(total, [*grouped.values(), idle])
    hours_n, hours_d = hours.numerator, hours.denominator
    parts = [
        Part(
            tenant,
            task_type,
            Fraction(hours_n * weight.numerator, hours_d * weight.denominator),
            cost,
        )
        for ((tenant, task_type), weight), cost in zip(grouped.items(), cents, strict=False)
    ]
    parts.append(
        Part(IDLE, "", Fraction(hours_n * idle.numerator, hours_d * idle.denominator), cents[-1])
    )
    return DaySplit(hours, total, share, measured is not None, used_key, tuple(parts))
