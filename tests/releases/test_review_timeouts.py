"""The timeout-rate SLO is judged where timeouts are counted: the gateway's days of run
evidence, in the periodic review (load tests record none; issue 34, table 6-2)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from ledger import services as ledger_services
from releases.models import Review
from tests.releases.review_helpers import checklist, push_days, sweep

pytestmark = pytest.mark.django_db


def _review(world, **days) -> dict:
    ledger_services.update_service(world.service, actor=None, slo_timeout_rate_pct=Decimal("0.5"))
    push_days(world.service, [950] * 7, **days)  # 950 ms against 800: a review is raised
    sweep()
    items = checklist(Review.objects.get(service=world.service))
    return items["cost_latency"]


def test_a_timeout_rate_above_its_slo_is_flagged_with_the_numbers(world):
    item = _review(world, timeouts=200)
    facts = {f["label"]: f["value"] for f in item.facts}
    assert facts["7-day timeout rate (run evidence)"] == (
        "2.00 % of 70,000 requests against an SLO of 0.50 %"
    )
    assert "7-day timeout rate 2.00 % is above the SLO of 0.50 %" in item.flags


def test_a_timeout_rate_within_its_slo_raises_nothing(world):
    item = _review(world, timeouts=20)
    facts = {f["label"]: f["value"] for f in item.facts}
    assert facts["7-day timeout rate (run evidence)"].startswith("0.20 % of 70,000")
    assert not any("timeout rate" in flag for flag in item.flags)


def test_days_that_did_not_count_timeouts_are_said_not_judged(world):
    item = _review(world)
    facts = {f["label"]: f["value"] for f in item.facts}
    assert facts["7-day timeout rate (run evidence)"] == (
        "not counted: the gateway's days say nothing of timeouts against an SLO of 0.50 %"
    )
    assert not any("timeout rate" in flag for flag in item.flags)
