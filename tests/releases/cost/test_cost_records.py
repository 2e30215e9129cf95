"""The stored cost (`releases.models.CostShare`): written when a day of run evidence or
a price sheet is recorded, recomputed by `manage.py recompute_cost`, and written out as
FOCUS by PostgreSQL's COPY byte for byte as the Python writer writes it."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from ledger.models import RunSummary, Service, Team
from ledger.services import record_price_sheet, record_run_summary
from releases.cost.focus import FocusStats, focus_lines
from releases.cost.focus_copy import copy_focus
from releases.cost.queries import cost_days, stored_cost_days
from releases.models import CostShare
from tests.releases.cost.test_cost_days import breakdown, materialize, price, summary
from tests.releases.factories import build_world, report

pytestmark = pytest.mark.django_db


def _yesterday() -> dt.date:
    return timezone.now().astimezone(dt.UTC).date() - dt.timedelta(days=1)


def _parts(days) -> list[tuple]:
    return [
        (
            day.service,
            day.date,
            day.price_per_gpu_hour,
            part.tenant,
            part.task_type,
            part.cost,
            round(float(part.gpu_hours), 6),
        )
        for day in days
        for part in day.parts
    ]


def test_a_recorded_day_has_its_cost_stored_in_the_same_transaction(team):
    world = build_world(team)  # its price sheet is in force from 30 days ago
    day = _yesterday()

    record_run_summary(world.service, actor=None, date=day, requests=100, output_tokens=5000)

    stored = list(stored_cost_days(day, day))
    assert _parts(stored) == _parts(cost_days(day, day))
    assert [part.tenant for part in stored[0].parts] == ["unattributed", "idle"]
    assert CostShare.objects.filter(summary__date=day).count() == 2


def test_a_price_sheet_reprices_the_days_it_covers(team):
    world = build_world(team)
    day = _yesterday()
    record_run_summary(world.service, actor=None, date=day, requests=100, output_tokens=5000)
    before = {part.tenant: part.cost for part in next(stored_cost_days(day, day)).parts}

    record_price_sheet(
        actor=None,
        gpu_model="H100-80GB",
        price_per_gpu_hour="4.9000",
        currency="USD",
        effective_from=day,
    )

    (after,) = stored_cost_days(day, day)
    assert after.price_per_gpu_hour == Decimal("4.9000")
    assert after.split is not None and after.split.cost == 2 * sum(before.values())
    assert _parts([after]) == _parts(cost_days(day, day))


def test_an_unpriced_day_is_one_row_counted_by_the_pages_and_the_export(team):
    world = build_world(team)
    day = _yesterday()
    old = day - dt.timedelta(days=90)  # before the price sheet
    summary(world.service, old, requests=5)
    materialize()

    (found,) = stored_cost_days(old, old)
    assert not found.priced
    assert CostShare.objects.get(date=old).priced is False
    stats = FocusStats()
    assert list(focus_lines(old, old, None, stats))[1:] == []
    assert (stats.rows, stats.service_days, stats.unpriced) == (0, 1, 1)


def test_recompute_cost_replaces_the_rows_of_its_period_and_says_how_many(team):
    world = build_world(team)
    day = _yesterday()
    record_run_summary(world.service, actor=None, date=day, requests=100, output_tokens=5000)
    # A load test recorded afterwards: the stored day does not know it until recomputed.
    report(world.live, "short", output_tokens_per_s=1000)
    assert next(stored_cost_days(day, day)).split.capacity_known is False
    out = StringIO()

    call_command(
        "recompute_cost",
        "--since",
        str(day),
        "--until",
        str(day + dt.timedelta(days=1)),
        "--service",
        "kb-assistant",
        stdout=out,
    )

    assert f"recomputed 1 service-days from {day} to {day}: 2 rows" in out.getvalue()
    assert next(stored_cost_days(day, day)).split.capacity_known is True


def test_a_day_pushed_again_replaces_its_cost(team):
    world = build_world(team)
    day = _yesterday()
    record_run_summary(world.service, actor=None, date=day, requests=100, output_tokens=5000)
    summary_id = RunSummary.objects.get(date=day).pk

    record_run_summary(world.service, actor=None, date=day, requests=200, output_tokens=9000)

    assert set(CostShare.objects.values_list("summary_id", "requests")) == {
        (summary_id, 200),
        (summary_id, 0),
    }


@pytest.mark.skipif(connection.vendor != "postgresql", reason="COPY is PostgreSQL's")
def test_the_copy_writes_the_python_writers_bytes_whatever_the_names(team):
    """Tenants a spreadsheet would run, quotes, commas, non-ASCII; a team to match; a day
    without breakdown rows, a day without a price, a scraped day beside a pushed one."""
    Team.objects.filter(pk=team.pk).update(name='+Ops, "platform" é')
    price(since=_yesterday() - dt.timedelta(days=5))
    world = build_world(team)
    other = build_world(team, slug="legal-drafts")
    report(world.live, "short", output_tokens_per_s=2000)
    awkward = ["=SUM(A1)", 'say "hi", then', "café ünï", "-1", "plain"]
    Service.objects.filter(pk=world.service.pk).update(tenants=awkward)
    last = _yesterday()
    for offset in range(3):
        date = last - dt.timedelta(days=offset)
        day = summary(world.service, date, requests=500, output_tokens=50_000, input_tokens=7)
        for n, tenant in enumerate(awkward):
            breakdown(
                day,
                tenant,
                "chat, long" if n % 2 else "rag",
                requests=100,
                output_tokens=10_000,
                input_tokens=7 if n == 0 else 0,
                errors_4xx=n,
            )
        summary(world.service, date, source="scrape", requests=3)
        summary(other.service, date, requests=10, output_tokens=333)
    summary(other.service, last - dt.timedelta(days=100), requests=1)  # no price then
    materialize()
    since = last - dt.timedelta(days=120)

    reference = "".join(focus_lines(since, last, None, FocusStats(), read=cost_days)).encode()
    python_stats, copy_stats = FocusStats(), FocusStats()
    stored = "".join(focus_lines(since, last, None, python_stats)).encode()
    copied = b"".join(copy_focus(since, last, None, copy_stats))
    one = b"".join(copy_focus(since, last, ["legal-drafts"]))

    assert copied == stored == reference
    assert b"'=SUM(A1)" in copied and b'"say ""hi"", then"' in copied
    assert "café ünï".encode() in copied and b"caf\\u00e9" in copied  # the Tags' JSON
    assert b"'+Ops" in copied
    assert (
        (copy_stats.rows, copy_stats.service_days, copy_stats.unpriced)
        == (
            python_stats.rows,
            python_stats.service_days,
            python_stats.unpriced,
        )
        == (3 * 6 + 3 * 2, 7, 1)
    )
    assert one == "".join(focus_lines(since, last, ["legal-drafts"])).encode()
    assert b"".join(copy_focus(since, last, [])) == "".join(focus_lines(since, last, [])).encode()


def test_a_price_sheet_repricing_a_fleet_queues_the_work_on_commit(
    team, monkeypatch, django_capture_on_commit_callbacks
):
    from releases.cost import services as cost_services
    from releases.cost.tasks import record_price_sheet_cost

    world = build_world(team)
    day = _yesterday()
    record_run_summary(world.service, actor=None, date=day, requests=100, output_tokens=5000)
    monkeypatch.setattr(cost_services, "PRICE_SHEET_INLINE_DAYS", 0)

    with django_capture_on_commit_callbacks() as queued:
        record_price_sheet(
            actor=None,
            gpu_model="H100-80GB",
            price_per_gpu_hour="4.9000",
            currency="USD",
            effective_from=day,
        )

    sent = [c for c in queued if getattr(c, "func", None).__name__ == "send_task"]
    assert [(c.args, c.keywords["args"]) for c in sent] == [
        (("record_price_sheet_cost",), ("H100-80GB", day.isoformat()))
    ]
    assert next(stored_cost_days(day, day)).price_per_gpu_hour == Decimal("2.4500")
    assert record_price_sheet_cost("H100-80GB", day.isoformat()) == 2
    assert next(stored_cost_days(day, day)).price_per_gpu_hour == Decimal("4.9000")
