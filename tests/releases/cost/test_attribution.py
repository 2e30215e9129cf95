"""A day's GPU cost split over tenants and task types: pure, no database."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from releases.cost.attribution import (
    IDLE,
    AllocationKey,
    Usage,
    day_gpu_hours,
    split_cents,
    split_day,
)

PRICE = Decimal("2.4500")


def _row(tenant, task_type, requests, output_tokens, ttft=None, tpot=None) -> Usage:
    return Usage(tenant, task_type, requests, output_tokens, ttft, tpot)


def test_the_idle_share_is_its_own_line_and_the_tenants_split_the_rest_by_output_tokens():
    # 2 replicas of 2 GPUs: 96 GPU-hours at 2.45 = 235.20. At 1,000 tokens/s a replica
    # the day could make 172.8 M tokens; 43.2 M were made, a quarter of it.
    rows = [
        _row("support", "chat", 1000, 32_400_000),
        _row("sales", "rag", 500, 10_800_000),
    ]
    split = split_day(
        rows,
        gpu_hours=day_gpu_hours(2, 2),
        price_per_gpu_hour=PRICE,
        output_tokens_per_s=1000,
        replicas=2,
    )

    assert split.gpu_hours == 96
    assert split.cost == Decimal("235.20")
    assert split.used_share == Fraction(1, 4)
    assert split.capacity_known
    assert split.key is AllocationKey.OUTPUT_TOKENS
    assert [(p.tenant, p.task_type, p.cost) for p in split.parts] == [
        ("support", "chat", Decimal("44.10")),  # 3/4 of the used 58.80
        ("sales", "rag", Decimal("14.70")),
        (IDLE, "", Decimal("176.40")),
    ]
    assert [p.gpu_hours for p in split.parts] == [18, 6, 72]


def test_rows_of_one_tenant_and_task_type_on_two_backends_are_one_part():
    rows = [_row("support", "chat", 10, 300), _row("support", "chat", 10, 100)]

    split = split_day(
        rows, gpu_hours=24, price_per_gpu_hour=Decimal(1), output_tokens_per_s=None, replicas=1
    )

    assert [(p.tenant, p.cost) for p in split.parts] == [
        ("support", Decimal("24.00")),
        (IDLE, Decimal("0.00")),
    ]
    assert not split.capacity_known  # no throughput measured: nothing is called idle


def test_request_seconds_weigh_slow_requests_more_and_fall_back_without_latencies():
    rows = [
        # 100 requests x 200 ms + 1,000 tokens x 20 ms = 40 s
        _row("support", "chat", 100, 1000, ttft=200, tpot=20),
        # 100 requests x 1,000 ms + 1,000 tokens x 100 ms = 200 s
        _row("legal", "summarization", 100, 1000, ttft=1000, tpot=100),
    ]
    by_seconds = split_day(
        rows,
        gpu_hours=24,
        price_per_gpu_hour=Decimal(1),
        output_tokens_per_s=None,
        replicas=1,
        key=AllocationKey.REQUEST_SECONDS,
    )
    without_latency = split_day(
        [rows[0], _row("legal", "summarization", 100, 1000)],
        gpu_hours=24,
        price_per_gpu_hour=Decimal(1),
        output_tokens_per_s=None,
        replicas=1,
        key=AllocationKey.REQUEST_SECONDS,
    )

    assert by_seconds.key is AllocationKey.REQUEST_SECONDS
    assert [p.cost for p in by_seconds.parts] == [Decimal("4.00"), Decimal("20.00"), 0]
    assert without_latency.key is AllocationKey.OUTPUT_TOKENS
    assert [p.cost for p in without_latency.parts] == [Decimal("12.00"), Decimal("12.00"), 0]


def test_a_day_without_rows_is_all_idle_and_one_without_tokens_splits_by_requests():
    idle_day = split_day(
        [], gpu_hours=24, price_per_gpu_hour=PRICE, output_tokens_per_s=500, replicas=1
    )
    no_tokens = split_day(
        [_row("a", "chat", 3, 0), _row("b", "chat", 1, 0)],
        gpu_hours=24,
        price_per_gpu_hour=Decimal(1),
        output_tokens_per_s=None,
        replicas=1,
    )

    assert [(p.tenant, p.cost) for p in idle_day.parts] == [(IDLE, Decimal("58.80"))]
    assert no_tokens.key is AllocationKey.REQUESTS
    assert [p.cost for p in no_tokens.parts] == [Decimal("18.00"), Decimal("6.00"), 0]


def test_more_tokens_than_the_capacity_is_the_whole_day_used():
    split = split_day(
        [_row("a", "chat", 1, 10**12)],
        gpu_hours=24,
        price_per_gpu_hour=Decimal(1),
        output_tokens_per_s=1,
        replicas=1,
    )
    assert split.used_share == 1
    assert split.parts[-1].cost == 0


def test_the_leftover_cents_go_to_the_largest_remainders():
    assert split_cents(Decimal("1.00"), [Fraction(1)] * 3) == [
        Decimal("0.34"),
        Decimal("0.33"),
        Decimal("0.33"),
    ]
    assert split_cents(Decimal("0.10"), [Fraction(1), Fraction(2)]) == [
        Decimal("0.03"),
        Decimal("0.07"),
    ]
    with pytest.raises(ValueError, match="nothing to split"):
        split_cents(Decimal(1), [])


@given(
    cents=st.integers(min_value=0, max_value=10**9),
    weights=st.lists(st.integers(min_value=0, max_value=10**12), min_size=1, max_size=40),
)
def test_parts_add_up_to_the_cent_and_stay_within_a_cent_of_their_share(cents, weights):
    total = Decimal(cents) / 100
    parts = split_cents(total, [Fraction(w) for w in weights])

    assert sum(parts) == total
    whole = sum(weights)
    for part, weight in zip(parts, weights, strict=True):
        exact = Fraction(cents, 1) * (
            Fraction(weight, whole) if whole else Fraction(1, len(weights))
        )
        assert abs(Fraction(part * 100) - exact) < 1


@given(
    rows=st.lists(
        st.tuples(
            st.sampled_from(["support", "sales", "legal", "unattributed"]),
            st.sampled_from(["chat", "rag", "sql", "summarization"]),
            st.integers(min_value=0, max_value=10**6),
            st.integers(min_value=0, max_value=10**9),
        ),
        max_size=30,
    ),
    replicas=st.integers(min_value=1, max_value=8),
    gpus=st.integers(min_value=1, max_value=8),
    price=st.decimals(min_value=0, max_value=100, places=4),
    throughput=st.one_of(st.none(), st.floats(min_value=1, max_value=10**5)),
)
def test_a_days_parts_add_up_to_its_cost_and_its_gpu_hours(rows, replicas, gpus, price, throughput):
    usage = [_row(*row) for row in rows]
    split = split_day(
        usage,
        gpu_hours=day_gpu_hours(replicas, gpus),
        price_per_gpu_hour=price,
        output_tokens_per_s=throughput,
        replicas=replicas,
    )

    assert sum(part.cost for part in split.parts) == split.cost
    assert sum(part.gpu_hours for part in split.parts) == split.gpu_hours
    assert split.parts[-1].tenant == IDLE
    assert len({(p.tenant, p.task_type) for p in split.parts}) == len(split.parts)
    assert all(part.cost >= 0 for part in split.parts)
