"""The sweep's cost and quota triggers: a live revision costing more per million output
tokens than it was released at, and a tenant rate-limited day after day. Run evidence,
breakdown rows and price sheets are rows as the gateway's push and the price-sheet verb
leave them; the day's cost is the cost pages' own (`releases.cost.queries.cost_days`),
stored by `materialize()` as recording them through the verbs would have.

The numbers: one H100 at 3.60 a GPU-hour is 86.40 a day; the load test's 1,000 output
tokens/s make a million in 0.2777… GPU-hours, so 1.00 a million is expected at release.
A day of 72 M output tokens then costs 1.20 a million (idle capacity included): 20 %
above, the production limit.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from ledger import services as ledger_services
from ledger.models import Event, PriceSheet, RunBreakdown, RunSummary, Service
from ledger.services.gateway_policies import create_gateway_policy
from releases.models import Review, ReviewTrigger
from releases.reviews.queries.reviews import trigger_links
from tests.ledger.factories import RevisionFactory, ServiceFactory
from tests.releases.cost.test_cost_days import materialize
from tests.releases.factories import complete_policy, report
from tests.releases.review_helpers import checklist, sweep, yesterday

pytestmark = pytest.mark.django_db

# Output tokens a day and the cost per million they make, at 86.40 a day.
AT_LIMIT = 72_000_000  # 1.20: 20 % above 1.00
ABOVE = 71_400_000  # 1.21: 21 %
BELOW = 75_000_000  # 1.15: 15 %


def priced(per_hour: str = "3.60", gpu_model: str = "H100-80GB") -> PriceSheet:
    """The only price of `gpu_model` (build_world records one for the cost_record gate)."""
    PriceSheet.objects.filter(gpu_model=gpu_model).delete()
    return PriceSheet.objects.create(
        gpu_model=gpu_model,
        price_per_gpu_hour=Decimal(per_hour),
        currency="USD",
        effective_from=yesterday() - dt.timedelta(days=60),
        recorded_at=timezone.now(),
    )


def measured(service: Service, revision=None, tokens_per_s: float | None = 1000.0) -> None:
    """The live revision's load test, with the throughput its expected cost is priced at."""
    report(revision or service.live_revision, "short", output_tokens_per_s=tokens_per_s)


def days(
    service: Service,
    output_tokens: Sequence[int],
    *,
    revision=None,
    hits: dict[str, Sequence[int]] | None = None,
    source: str = RunSummary.Source.GATEWAY,
    end: dt.date | None = None,
) -> list[RunSummary]:
    """One day of run evidence per value, `end` (yesterday) the last; `hits`: rate-limit
    hits a day per tenant (a breakdown row each, the output tokens on the first)."""
    found = []
    count = len(output_tokens)
    end = end or yesterday()
    for n, tokens in enumerate(output_tokens):
        summary = RunSummary.objects.create(
            service=service,
            date=end - dt.timedelta(days=count - 1 - n),
            source=source,
            revision=revision or service.live_revision,
            recorded_at=timezone.now(),
            requests=1000,
            output_tokens=tokens,
        )
        for position, (tenant, per_day) in enumerate(sorted((hits or {}).items())):
            RunBreakdown.objects.create(
                summary=summary,
                tenant=tenant,
                task_type="chat",
                backend="live-1",
                requests=1000 if position == 0 else 0,
                output_tokens=tokens if position == 0 else 0,
                rate_limit_hits=per_day[n],
            )
        found.append(summary)
    return found


def triggers(service: Service, kind: str) -> list[ReviewTrigger]:
    return list(ReviewTrigger.objects.filter(review__service=service, kind=kind).order_by("key"))


@pytest.fixture
def costed(world):
    priced()
    measured(world.service)
    return world


# ---------------------------------------------------------------- cost drift


def test_a_cost_more_than_the_tier_limit_above_the_release_baseline_raises_a_review(costed):
    days(costed.service, [ABOVE] * 7)
    materialize()

    sweep()

    (trigger,) = triggers(costed.service, "cost_drift")
    assert trigger.key == f"revision:{costed.live.pk}"
    numbers = trigger.numbers
    assert numbers["cost_per_million_7d"] == 1.21
    assert numbers["baseline_per_million"] == 1.0
    assert (numbers["currency"], numbers["increase_pct"], numbers["limit_pct"]) == ("USD", 21, 20)
    assert (numbers["days"], numbers["output_tokens_per_s"], numbers["gpu_count"]) == (7, 1000, 1)
    assert numbers["price_per_gpu_hour"] == 3.6
    assert numbers["window_last"] == yesterday().isoformat()
    assert trigger.summary.startswith(
        "7-day cost per million output tokens 1.21 USD (7 priced days of "
        f"{costed.live.label} to {yesterday():%Y-%m-%d}, idle capacity included) is 21 % "
        "above the 1.00 USD expected at release (1,000 output tokens/s on 1 GPU at 3.60 USD "
        "per GPU-hour); the limit for production services is 20 %."
    )
    links = trigger_links(trigger, costed.service)
    assert [link.url for link in links] == [f"/services/{costed.service.slug}/cost/?days=7"]


@pytest.mark.parametrize("tokens", [AT_LIMIT, BELOW], ids=["at the limit", "below"])
def test_a_cost_at_or_below_the_tier_limit_raises_nothing(costed, tokens):
    days(costed.service, [tokens] * 7)
    materialize()

    sweep()

    assert triggers(costed.service, "cost_drift") == []


def test_the_limit_is_the_tiers(costed):
    Service.objects.filter(pk=costed.service.pk).update(tier="internal")
    days(costed.service, [ABOVE] * 7)  # 21 %: within internal's 30 %

    sweep()

    assert triggers(costed.service, "cost_drift") == []

    Service.objects.filter(pk=costed.service.pk).update(tier="experimental")
    RunSummary.objects.all().delete()
    days(costed.service, [57_000_000] * 7)  # 1.52 a million: 52 %, above experimental's 50 %
    materialize()
    sweep()

    (trigger,) = triggers(costed.service, "cost_drift")
    assert (trigger.numbers["increase_pct"], trigger.numbers["limit_pct"]) == (52, 50)


def test_a_price_change_within_the_window_is_no_drift(costed):
    """The baseline is priced at each measured day's price: a dearer price sheet moves both."""
    PriceSheet.objects.create(
        gpu_model="H100-80GB",
        price_per_gpu_hour=Decimal("7.20"),
        currency="USD",
        effective_from=yesterday() - dt.timedelta(days=2),
        recorded_at=timezone.now(),
    )
    days(costed.service, [BELOW] * 7)
    materialize()

    sweep()

    assert triggers(costed.service, "cost_drift") == []


def test_without_a_price_sheet_there_is_no_cost_to_judge(world):
    PriceSheet.objects.all().delete()  # build_world's, for the cost_record gate
    measured(world.service)
    days(world.service, [ABOVE // 2] * 7)
    materialize()

    sweep()

    assert triggers(world.service, "cost_drift") == []


def test_without_a_measured_throughput_there_is_no_baseline(world):
    priced()
    measured(world.service, tokens_per_s=None)
    days(world.service, [ABOVE // 2] * 7)
    materialize()
    Service.objects.filter(pk=world.service.pk).update(
        created_at=timezone.now() - dt.timedelta(days=91)
    )

    sweep()  # for the cadence: the checklist says what it could not measure

    assert triggers(world.service, "cost_drift") == []
    items = checklist(Review.objects.get(service=world.service))
    facts = {f["label"]: f["value"] for f in items["cost_latency"].facts}
    assert facts["7-day cost per million output tokens (measured)"].startswith("2.42 USD over 7")
    assert facts["Cost per million output tokens expected at release"] == (
        "unknown: no load test measured a throughput"
    )


def test_fewer_than_three_priced_days_with_output_tokens_judge_nothing(costed):
    days(costed.service, [0, 0, 0, 0, 0, ABOVE // 2, ABOVE // 2])
    materialize()

    sweep()

    assert triggers(costed.service, "cost_drift") == []


def test_only_the_days_the_live_revision_served_are_measured(costed):
    previous = RevisionFactory(service=costed.service, runtime=costed.live.runtime)
    # Four dear days of the revision before, then three of the live one within the limit.
    days(costed.service, [ABOVE // 2] * 4, revision=previous, end=yesterday() - dt.timedelta(3))
    materialize()
    days(costed.service, [BELOW] * 3)
    materialize()

    sweep()

    assert triggers(costed.service, "cost_drift") == []

    RunSummary.objects.filter(revision=previous).update(revision=costed.live)
    materialize()
    sweep()

    (trigger,) = triggers(costed.service, "cost_drift")
    assert trigger.numbers["days"] == 7


def test_the_checklist_prefills_the_cost_numbers(costed):
    days(costed.service, [ABOVE] * 7)
    materialize()

    sweep()

    item = checklist(Review.objects.get(service=costed.service))["cost_latency"]
    facts = {f["label"]: f for f in item.facts}
    measured_fact = facts["7-day cost per million output tokens (measured)"]
    assert measured_fact["value"] == (
        f"1.21 USD over 7 priced days of {costed.live.label} with output tokens, idle "
        "capacity included"
    )
    assert measured_fact["url"] == f"/services/{costed.service.slug}/cost/?days=7"
    assert facts["Cost per million output tokens expected at release"]["value"] == (
        "1.00 USD (1,000 output tokens/s on 1 GPU at 3.60 USD per GPU-hour)"
    )
    assert facts["Cost drift allowed"]["value"] == "20 % (production), on at least 3 priced days"
    assert any(flag.startswith("7-day cost per million output tokens 1.21") for flag in item.flags)


# ---------------------------------------------------------------- quota pressure


def test_a_tenant_rate_limited_on_three_of_seven_days_raises_one_finding(world):
    days(world.service, [1000] * 7, hits={"support": [0, 40, 0, 5, 0, 0, 120]})

    sweep()

    (trigger,) = triggers(world.service, "quota_pressure")
    assert trigger.key == "tenant:support"
    policy = world.live.gateway_policy
    first = yesterday() - dt.timedelta(days=5)
    numbers = trigger.numbers
    assert numbers["hits_by_day"] == {
        first.isoformat(): 40,
        (first + dt.timedelta(days=2)).isoformat(): 5,
        yesterday().isoformat(): 120,
    }
    assert (numbers["tenant"], numbers["days"], numbers["min_days"], numbers["hits"]) == (
        "support",
        3,
        3,
        165,
    )
    assert (numbers["rpm"], numbers["tpm"], numbers["in_policy"]) == (600, 200_000, True)
    assert (numbers["policy"], numbers["policy_version"]) == (policy.label, policy.version)
    assert trigger.summary == (
        f"Tenant support hit its rate limit on 3 of the last 7 days to {yesterday():%Y-%m-%d} "
        f"({first:%Y-%m-%d} 40, {first + dt.timedelta(days=2):%Y-%m-%d} 5, "
        f"{yesterday():%Y-%m-%d} 120: 165 calls refused); its quota: 600 rpm and 200,000 tpm "
        f"in gateway policy {policy.label}. The limit is 3 days."
    )
    (link,) = trigger_links(trigger, world.service)
    assert link.url == (
        f"/services/{world.service.slug}/gateway-policy/{policy.version}/#tenant-support"
    )


def test_two_days_of_rate_limits_raise_nothing(world):
    days(world.service, [1000] * 7, hits={"support": [0, 40, 0, 0, 0, 0, 120]})

    sweep()

    assert not Review.objects.filter(service=world.service).exists()


def test_one_finding_per_tenant_and_none_for_unattributed_calls(world):
    days(
        world.service,
        [1000] * 7,
        hits={
            "sales": [1, 1, 1, 1, 1, 1, 1],
            "support": [0, 0, 0, 0, 9, 9, 9],
            "unattributed": [5, 5, 5, 5, 5, 5, 5],
        },
    )

    sweep()

    found = triggers(world.service, "quota_pressure")
    assert [(t.key, t.numbers["days"]) for t in found] == [
        ("tenant:sales", 7),
        ("tenant:support", 3),
    ]


def test_days_outside_the_window_and_scraped_days_do_not_count(world):
    # Three days before the window, and the engine's scrape (which never sees the gateway
    # refuse a call) in it.
    days(world.service, [1000] * 3, hits={"support": [9, 9, 9]}, end=yesterday() - dt.timedelta(7))
    days(world.service, [1000] * 3, hits={"support": [9, 9, 9]}, source=RunSummary.Source.SCRAPE)

    sweep()

    assert triggers(world.service, "quota_pressure") == []


def test_the_checklist_asks_finops_and_the_business_owner_to_reconfirm_each_quota(world):
    days(
        world.service,
        [1000] * 7,
        hits={"marketing": [0, 0, 0, 0, 7, 8, 9], "support": [1, 0, 1, 0, 1, 0, 0]},
    )

    sweep()

    review = Review.objects.get(service=world.service)
    item = checklist(review)["quota_reconfirmation"]
    assert list(review.items.values_list("key", flat=True))[-1] == "quota_reconfirmation"
    assert item.suggestion == "attention"
    policy = world.live.gateway_policy
    facts = {f["label"]: f for f in item.facts}
    first = yesterday() - dt.timedelta(days=2)
    assert facts["Tenant marketing: days rate-limited"]["value"] == (
        f"3 of the last 7 days to {yesterday():%Y-%m-%d}, 24 calls refused: "
        f"{first:%Y-%m-%d} 7, {first + dt.timedelta(days=1):%Y-%m-%d} 8, {yesterday():%Y-%m-%d} 9"
    )
    # The service serves marketing, but the policy in force has no entry for it: no link.
    assert facts["Tenant marketing: quota in force"] == {
        "label": "Tenant marketing: quota in force",
        "value": f"no entry in the gateway policy in force ({policy.label})",
        "url": "",
    }
    assert facts["Tenant support: quota in force"] == {
        "label": "Tenant support: quota in force",
        "value": f"600 rpm and 200,000 tpm in gateway policy {policy.label}",
        "url": f"/services/{world.service.slug}/gateway-policy/{policy.version}/#tenant-support",
    }
    assert facts["Reconfirmed by"]["value"].startswith("FinOps and the business owner")
    assert item.flags == [
        "reconfirm the quota of tenant marketing: rate-limited on 3 of the last 7 days",
        "reconfirm the quota of tenant support: rate-limited on 3 of the last 7 days",
    ]


def test_the_policy_page_anchors_each_tenants_entry(client, auditor, world):
    client.force_login(auditor)
    policy = world.live.gateway_policy

    page = client.get(f"/services/{world.service.slug}/gateway-policy/{policy.version}/")

    assert page.status_code == 200
    assert 'id="tenant-support"' in page.content.decode()


def test_quota_pressure_joins_an_open_review_with_its_checklist_item(costed):
    days(costed.service, [ABOVE] * 7)
    materialize()
    sweep()
    review = Review.objects.get(service=costed.service)
    assert "quota_reconfirmation" not in checklist(review)
    positions = list(review.items.values_list("position", flat=True))

    RunBreakdown.objects.bulk_create(
        RunBreakdown(summary=summary, tenant="sales", task_type="chat", rate_limit_hits=3)
        for summary in RunSummary.objects.filter(service=costed.service)
    )
    report_ = sweep()

    assert [f.kind for raised in report_.raised for f in raised.findings] == ["quota_pressure"]
    assert Review.objects.filter(service=costed.service).count() == 1
    item = checklist(review)["quota_reconfirmation"]
    assert item.position == max(positions) + 1
    assert item.flags == [
        "reconfirm the quota of tenant sales: rate-limited on 7 of the last 7 days"
    ]
    assert [t.kind for t in review.triggers.order_by("pk")] == ["cost_drift", "quota_pressure"]
    added = Event.objects.get(action="review.trigger_added").payload_data
    assert [t["kind"] for t in added["triggers"]] == ["quota_pressure"]
    assert [item["key"] for item in added["checklist_added"]] == ["quota_reconfirmation"]


# ---------------------------------------------------------------- the sweep's reads


def _fleet(team, count: int) -> None:
    priced()
    for n in range(count):
        service = ServiceFactory(slug=f"svc-{n}", team=team, tier="production", tenants=["a", "b"])
        policy = create_gateway_policy(service, actor=None, document=complete_policy(service))
        revision = RevisionFactory(service=service, gateway_policy_version=policy.label)
        ledger_services.set_live_revision(service, revision, actor=None)
        measured(service, revision)
        days(service, [ABOVE] * 7, revision=revision, hits={"a": [1] * 7, "b": [0] * 7})
    materialize()


@pytest.mark.parametrize("count", [3, 9])
def test_the_cost_and_quota_reads_do_not_grow_with_the_services(team, sre, count):
    _fleet(team, count)

    with CaptureQueriesContext(connection) as one_batch:
        report_ = sweep(batch_size=10, dry_run=True)

    kinds = {f.kind for raised in report_.raised for f in raised.findings}
    assert (report_.scanned, kinds) == (count, {"cost_drift", "quota_pressure"})
    # Read once: engine versions, platform people, reviews past due, the services to
    # review; then the batch's savepoint and its release (a dry run takes no lock) and
    # its reads, as test_review_conduct counts them, the two of the cost's and quota's
    # among them, and the release in force each plan names is none here.
    assert len(one_batch) == 4 + 2 + 13


def test_the_review_page_shows_both_triggers_with_their_links(client, auditor, costed):
    days(costed.service, [ABOVE] * 7, hits={"support": [2] * 7})
    materialize()
    sweep()
    review = Review.objects.get(service=costed.service)
    client.force_login(auditor)

    page = client.get(f"/reviews/{review.pk}/")

    assert page.status_code == 200
    body = page.content.decode()
    policy = costed.live.gateway_policy
    assert f'href="/services/{costed.service.slug}/cost/?days=7"' in body
    assert (
        f'href="/services/{costed.service.slug}/gateway-policy/{policy.version}/#tenant-support"'
        in body
    )
    assert 'id="item-quota_reconfirmation"' in body
    assert "reconfirm the quota of tenant support" in body
