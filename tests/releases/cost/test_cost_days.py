"""Each service-day of run evidence, priced and split: what `cost_days` reads and yields."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from django.utils import timezone

from ledger.models import PriceSheet, RunBreakdown, RunSummary
from releases.cost.attribution import IDLE, AllocationKey
from releases.cost.queries import PartUsage, cost_days
from releases.cost.services import record_cost
from releases.models import Release
from tests.releases.factories import build_world, file_release, report
from tests.replay.factories import BackendFactory

pytestmark = pytest.mark.django_db

TODAY = dt.date(2026, 11, 30)


def summary(service, day, source="gateway", revision=None, **totals) -> RunSummary:
    return RunSummary.objects.create(
        service=service,
        date=day,
        source=source,
        revision=revision or service.live_revision,
        recorded_at=timezone.now(),
        **totals,
    )


def breakdown(day_summary, tenant, task_type, backend="live-1", **counts) -> RunBreakdown:
    return RunBreakdown.objects.create(
        summary=day_summary, tenant=tenant, task_type=task_type, backend=backend, **counts
    )


def price(gpu_model="H100-80GB", per_hour="2.45", since=TODAY - dt.timedelta(days=30)):
    return PriceSheet.objects.create(
        gpu_model=gpu_model,
        price_per_gpu_hour=Decimal(per_hour),
        currency="USD",
        effective_from=since,
        recorded_at=timezone.now(),
    )


def materialize(since=dt.date(2000, 1, 1), until=dt.date(2100, 1, 1)) -> None:
    """Store the cost of the days a test created with the ORM (`summary`, `breakdown`,
    `price`): recording them through the verbs would have, from their Events
    (`releases.cost.services.record_cost_of_events`); the ORM appends none."""
    record_cost(since, until)


@pytest.fixture
def world(team):
    return build_world(team)


def test_a_day_is_priced_split_by_output_tokens_and_its_idle_capacity_kept_apart(world):
    price()
    # A second routed backend of the live revision: two replicas of one GPU, 48 GPU-hours.
    BackendFactory(name="kb-assistant-live-2", revision=world.live)
    report(world.live, "short", output_tokens_per_s=1000)
    day = summary(world.service, TODAY, requests=1500, output_tokens=43_200_000)
    breakdown(day, "support", "chat", requests=600, output_tokens=16_200_000, errors_5xx=10)
    breakdown(day, "support", "chat", "live-2", requests=400, output_tokens=16_200_000)
    breakdown(day, "sales", "rag", requests=500, output_tokens=10_800_000, refusals=25)

    (found,) = cost_days(TODAY, TODAY)

    assert (found.service, found.date, found.currency) == ("kb-assistant", TODAY, "USD")
    assert found.served_by.replicas == 2
    assert found.served_by.label == world.live.label
    assert found.served_by.fingerprint == world.live.fingerprint
    split = found.split
    # 48 GPU-hours at 2.45 = 117.60; 43.2 M tokens of the 172.8 M two replicas make a day.
    assert (split.gpu_hours, split.cost, split.key) == (48, Decimal("117.60"), "output_tokens")
    assert [(p.tenant, p.task_type, p.cost) for p in split.parts] == [
        ("sales", "rag", Decimal("7.35")),
        ("support", "chat", Decimal("22.05")),
        (IDLE, "", Decimal("88.20")),
    ]
    assert found.usage[("support", "chat")] == PartUsage(1000, 0, 32_400_000, 990)
    assert found.usage[("sales", "rag")] == PartUsage(500, 0, 10_800_000, 475)


def test_the_gateways_day_wins_a_scrape_only_day_is_unattributed_and_no_price_is_unpriced(world):
    PriceSheet.objects.all().delete()  # build_world's, for the gate: this test sets its own
    price(since=TODAY - dt.timedelta(days=1))
    gateway_day = summary(world.service, TODAY, requests=10, output_tokens=100)
    breakdown(gateway_day, "support", "chat", requests=10, output_tokens=100)
    summary(world.service, TODAY, source="scrape", requests=99, output_tokens=9_999)
    summary(world.service, TODAY - dt.timedelta(days=1), source="scrape", requests=7)
    summary(world.service, TODAY - dt.timedelta(days=2), requests=5)

    days = {found.date: found for found in cost_days(TODAY - dt.timedelta(days=2), TODAY)}

    assert [p.tenant for p in days[TODAY].parts] == ["support", IDLE]
    assert days[TODAY].usage == {("support", "chat"): PartUsage(10, 0, 100, 10)}
    scraped = days[TODAY - dt.timedelta(days=1)]
    assert [(p.tenant, p.task_type) for p in scraped.parts] == [
        ("unattributed", "unattributed"),
        (IDLE, ""),
    ]
    # No throughput measured: every GPU-hour is the tenants', and the day says so.
    assert not scraped.split.capacity_known
    assert scraped.parts[0].cost == Decimal("58.80")
    before_the_price = days[TODAY - dt.timedelta(days=2)]
    assert not before_the_price.priced
    assert before_the_price.parts == ()


def test_the_price_in_force_is_the_latest_version_on_or_before_the_day(world):
    price(per_hour="2.00", since=TODAY - dt.timedelta(days=10))
    price(per_hour="3.00", since=TODAY)
    summary(world.service, TODAY - dt.timedelta(days=1), requests=1)
    summary(world.service, TODAY, requests=1)

    costs = [found.split.cost for found in cost_days(TODAY - dt.timedelta(days=1), TODAY)]

    assert costs == [Decimal("48.00"), Decimal("72.00")]


def test_the_release_that_made_the_revision_live_is_named(world, owner):
    price()
    release = file_release(world, owner)
    Release.objects.filter(pk=release.pk).update(
        state=Release.State.RELEASED, submitted_at=timezone.now()
    )
    summary(world.service, TODAY, revision=world.candidate, requests=1)

    (found,) = cost_days(TODAY, TODAY)

    assert found.served_by.release == f"release #{release.pk}"


def test_request_seconds_is_the_setting_that_changes_the_key(world, settings):
    settings.COST_ALLOCATION_KEY = "request_seconds"
    price()
    day = summary(world.service, TODAY, requests=200, output_tokens=2000)
    breakdown(
        day, "support", "chat", requests=100, output_tokens=1000, ttft_p50_ms=200, tpot_p50_ms=20
    )
    breakdown(
        day, "sales", "rag", requests=100, output_tokens=1000, ttft_p50_ms=1000, tpot_p50_ms=100
    )

    (found,) = cost_days(TODAY, TODAY)

    assert found.split.key is AllocationKey.REQUEST_SECONDS
    assert [p.cost for p in found.parts] == [Decimal("49.00"), Decimal("9.80"), 0]


def test_the_queries_do_not_grow_with_days_services_or_rows(team, django_assert_num_queries):
    price()
    worlds = [build_world(team, slug=f"svc-{n}") for n in range(2)]

    def fill(offsets: range) -> None:
        for world in worlds:
            for offset in offsets:
                day = summary(world.service, TODAY - dt.timedelta(days=offset), requests=30)
                for tenant in ("support", "sales", "unattributed"):
                    breakdown(day, tenant, "chat", requests=10, output_tokens=5)

    fill(range(1))
    with django_assert_num_queries(7) as one:
        list(cost_days(TODAY - dt.timedelta(days=20), TODAY))
    fill(range(1, 20))
    with django_assert_num_queries(len(one.captured_queries)):
        found = list(cost_days(TODAY - dt.timedelta(days=20), TODAY))
    assert len(found) == 2 * 20
