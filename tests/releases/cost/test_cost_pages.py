"""Where people see the cost: the service's and the fleet's cost pages, the catalog's
column, and the release page's expected and measured cost per million output tokens."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal

import pytest
import time_machine
from django.utils import timezone

from ledger.models import PriceSheet
from releases.cost.release_cost import release_cost
from releases.models import Release
from tests.releases.cost.test_cost_days import breakdown, materialize, price, summary
from tests.releases.factories import build_world, file_release, report
from tests.support.charts import chart_specs

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 12, 1, 9, tzinfo=dt.UTC)
YESTERDAY = dt.date(2026, 11, 30)


@pytest.fixture(autouse=True)
def _frozen():
    with time_machine.travel(NOW, tick=False):
        yield


@pytest.fixture
def costed(team):
    """kb-assistant: 2 days of breakdown rows at 2.45 USD/GPU-hour, half its capacity
    used by two tenants; legal-drafts: one day without a breakdown."""
    price(since=YESTERDAY - dt.timedelta(days=40))
    world = build_world(team)
    report(world.live, "short", output_tokens_per_s=1000)
    for offset in range(2):
        day = summary(
            world.service,
            YESTERDAY - dt.timedelta(days=offset),
            requests=300,
            output_tokens=43_200_000,
        )
        breakdown(day, "support", "chat", requests=200, output_tokens=32_400_000, errors_4xx=20)
        breakdown(day, "sales", "rag", requests=100, output_tokens=10_800_000, refusals=10)
    other = build_world(team, slug="legal-drafts")
    summary(other.service, YESTERDAY, requests=50, output_tokens=1000)
    materialize()
    return world


def _text(response) -> str:
    return re.sub(r"\s+", " ", response.content.decode())


def test_the_service_page_shows_tenants_task_types_idle_and_the_chart(client, auditor, costed):
    client.force_login(auditor)

    response = client.get("/services/kb-assistant/cost/")

    assert response.status_code == 200
    text = _text(response)
    # Two days of 24 GPU-hours at 2.45: 117.60; half of it idle.
    assert "117.60 USD" in text
    assert "58.80 USD" in text  # the idle line
    by_tenant = text[text.index('id="by-tenant"') : text.index('id="by-task-type"')]
    # support: 3/4 of the used 58.80 = 44.10, 64.8 M output tokens, 360 accepted answers.
    assert re.search(r"support</th>.*?44\.10.*?64,800,000.*?0\.68.*?360.*?0\.1225", by_tenant)
    assert re.search(r"sales</th>.*?14\.70.*?21,600,000.*?0\.68.*?180.*?0\.0817", by_tenant)
    assert "chat" in text[text.index('id="by-task-type"') :]
    (spec,) = chart_specs(response.content.decode())
    assert [trace["name"] for trace in spec["data"]] == [
        "tenants",
        "idle capacity",
        "per million output tokens",
    ]


def test_the_fleet_page_lists_every_service_and_says_what_it_could_not_cost(
    client, auditor, costed
):
    client.force_login(auditor)

    text = _text(client.get("/cost/?days=7"))

    by_service = text[text.index('id="by-service"') : text.index('id="by-tenant"')]
    assert "kb-assistant</th>" in by_service and "legal-drafts</th>" in by_service
    assert re.search(r"legal-drafts</th>.*?58\.80", by_service)
    # legal-drafts has no load test: all its GPU-hours are its unattributed use.
    assert "has no measured throughput" in text
    assert "last 7 days" in text


def test_a_period_without_evidence_says_so_and_how_cost_is_counted(client, auditor, team):
    build_world(team)
    client.force_login(auditor)

    text = _text(client.get("/services/kb-assistant/cost/"))

    assert "No run evidence from 2026-11-01 to 2026-11-30, so no cost." in text
    assert "/price-sheets/" in text


def test_an_unpriced_day_is_counted_not_costed(client, auditor, team):
    world = build_world(team)
    PriceSheet.objects.all().delete()  # build_world's, for the gate
    summary(world.service, YESTERDAY, requests=5)
    materialize()
    client.force_login(auditor)

    text = _text(client.get("/services/kb-assistant/cost/"))

    assert "1 service-day has no price sheet in force for its GPU model" in text


def test_who_may_read(client, outsider, costed):
    assert client.get("/cost/").status_code == 302  # to the login page
    client.force_login(outsider)
    assert client.get("/services/kb-assistant/cost/").status_code == 200
    assert client.get("/services/no-such/cost/").status_code == 404
    assert client.post("/cost/").status_code == 405


def test_the_fleet_page_reads_a_fixed_number_of_queries(
    client, auditor, costed, team, django_assert_max_num_queries
):
    client.force_login(auditor)
    client.get("/cost/")
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as few:
        client.get("/cost/")
    for n in range(3):
        world = build_world(team, slug=f"more-{n}")
        for offset in range(5):
            day = summary(world.service, YESTERDAY - dt.timedelta(days=offset), requests=10)
            breakdown(day, "support", "chat", requests=10, output_tokens=100)
    materialize()
    with django_assert_max_num_queries(len(few.captured_queries)):
        client.get("/cost/")


def test_the_catalog_has_a_cost_column(client, auditor, costed):
    client.force_login(auditor)

    text = _text(client.get("/services/"))

    assert "Cost, 30 days" in text
    assert re.search(r'href="/services/kb-assistant/cost/">117\.60 USD', text)


def test_the_release_page_shows_expected_cost_and_after_release_the_measured_one(
    client, auditor, owner, team
):
    price(per_hour="2.00", since=YESTERDAY - dt.timedelta(days=60))
    world = build_world(team)
    # 1 GPU at 500 tokens/s live, 1,000 tokens/s for the candidate: 1.11 against 0.56
    # GPU-hours per million output tokens.
    report(world.live, "short", output_tokens_per_s=500)
    report(world.candidate, "short", output_tokens_per_s=1000)
    release = file_release(world, owner)
    client.force_login(auditor)

    expected = release_cost(release)
    before = _text(client.get(f"/releases/{release.pk}/"))
    Release.objects.filter(pk=release.pk).update(
        state=Release.State.RELEASED,
        submitted_at=timezone.now(),
        closed_at=NOW - dt.timedelta(days=3),
    )
    for offset in range(3):
        summary(
            world.service,
            YESTERDAY - dt.timedelta(days=offset),
            revision=world.candidate,
            requests=10,
            output_tokens=48_000_000,
        )
    materialize()
    release.refresh_from_db()
    measured = release_cost(release)
    after = _text(client.get(f"/releases/{release.pk}/"))

    assert (expected.live.per_million, expected.candidate.per_million) == (
        Decimal("1.11"),
        Decimal("0.56"),
    )
    assert round(expected.change_pct) == -50
    shown = before[before.index('id="cost"') : before.index('class="release-layout"')]
    assert "1.11 USD" in shown and "0.56 USD" in shown and "-50.0 %" in shown, shown
    assert "measured since the release" not in before
    # The candidate's one routed backend of one GPU: 24 GPU-hours a day at 2.00 over
    # 48 M output tokens, 1.00 per million.
    assert (measured.measured_per_million, measured.measured_days) == (Decimal("1.00"), 3)
    assert "1.00 USD over 3 days of run evidence" in after


def test_a_services_page_marks_the_day_its_served_revision_changed(client, auditor, team):
    price(since=YESTERDAY - dt.timedelta(days=40))
    world = build_world(team)
    for offset, revision in ((2, world.live), (1, world.candidate), (0, world.candidate)):
        summary(world.service, YESTERDAY - dt.timedelta(days=offset), revision=revision, requests=1)
    materialize()
    client.force_login(auditor)

    response = client.get("/services/kb-assistant/cost/")
    fleet = client.get("/cost/")

    text = _text(response)
    switched = str(YESTERDAY - dt.timedelta(days=1))
    label = f"kb-assistant {world.candidate.label}"
    assert re.search(
        rf"{switched}</time> <span class=\"badge info\">now serving</span> <a href=\"[^\"]+\">{label}</a>",
        text,
    )
    (spec,) = chart_specs(response.content.decode())
    assert [shape["x0"] for shape in spec["layout"]["shapes"]] == [switched]
    assert "now serving" not in _text(fleet)  # the fleet's trend marks releases only
