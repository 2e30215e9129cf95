"""Recording price sheet versions (`services.record_price_sheet`) and reading them back
(`ledger.queries.price_sheets`)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from ledger import queries, services
from ledger.chain import verify_chain
from ledger.models import Event, PriceSheet
from ledger.permissions import can_record_price_sheet
from tests.factories import UserFactory
from tests.ledger.factories import RevisionFactory, RuntimeFactory

pytestmark = pytest.mark.django_db

DAY = dt.date(2026, 11, 1)


def _record(actor=None, **fields):
    values = {
        "gpu_model": "H100-80GB",
        "price_per_gpu_hour": "2.4500",
        "currency": "USD",
        "effective_from": DAY,
        "note": "Cloud list price.",
        **fields,
    }
    return services.record_price_sheet(actor=actor, **values)


def test_an_sre_records_a_version_with_its_event(sre):
    sheet = _record(sre)

    assert sheet.price_per_gpu_hour == Decimal("2.4500")
    assert sheet.recorded_by == sre
    event = Event.objects.get(action="price_sheet.recorded")
    assert event.actor == sre
    assert event.subject_label == "H100-80GB price from 2026-11-01"
    assert event.payload_data == {
        "gpu_model": "H100-80GB",
        "price_per_gpu_hour": "2.4500",
        "currency": "USD",
        "effective_from": "2026-11-01",
        "note": "Cloud list price.",
    }
    assert verify_chain().ok


def test_a_price_announced_ahead_is_recorded(sre):
    sheet = _record(sre, effective_from=dt.date.today() + dt.timedelta(days=60))

    assert sheet.pk is not None


def test_a_second_version_on_the_same_day_is_refused_pointing_at_the_next_day(sre):
    _record(sre)

    with pytest.raises(ValidationError) as refused:
        _record(sre, price_per_gpu_hour="2.9900")

    (message,) = refused.value.message_dict["effective_from"]
    assert "H100-80GB already has a price from 2026-11-01" in message
    assert "record the new price from 2026-11-02 or later" in message
    assert PriceSheet.objects.count() == 1
    assert Event.objects.filter(action="price_sheet.recorded").count() == 1


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"currency": "usd"}, "currency", "three capital letters"),
        ({"currency": "US"}, "currency", "ISO 4217"),
        ({"currency": ""}, "currency", "ISO 4217"),
        ({"price_per_gpu_hour": "-1"}, "price_per_gpu_hour", "cannot be negative"),
        ({"price_per_gpu_hour": "2.45001"}, "price_per_gpu_hour", "more than 4 decimals"),
        ({"price_per_gpu_hour": "cheap"}, "price_per_gpu_hour", "not a number"),
        ({"price_per_gpu_hour": "NaN"}, "price_per_gpu_hour", "finite"),
        ({"price_per_gpu_hour": "100000000"}, "price_per_gpu_hour", "below"),
        ({"gpu_model": "  "}, "gpu_model", "Name the GPU model"),
        ({"gpu_model": "G" * 61}, "gpu_model", "at most 60"),
        ({"effective_from": "2026-02-30"}, "effective_from", "not a date"),
        ({"effective_from": dt.datetime(2026, 11, 1, 9)}, "effective_from", "not a time"),
        ({"note": "n" * 301}, "note", "at most 300"),
    ],
)
def test_bad_input_is_refused_naming_the_field(sre, fields, field, words):
    with pytest.raises(ValidationError) as refused:
        _record(sre, **fields)

    assert field in refused.value.message_dict
    assert words in " ".join(refused.value.message_dict[field])
    assert not PriceSheet.objects.exists()


def test_every_bad_field_is_named_at_once(sre):
    with pytest.raises(ValidationError) as refused:
        _record(sre, gpu_model="", currency="dollars", price_per_gpu_hour="-2")

    assert set(refused.value.message_dict) == {"gpu_model", "currency", "price_per_gpu_hour"}


def test_zero_is_a_price(sre):
    assert _record(sre, price_per_gpu_hour=0).price_per_gpu_hour == 0


@pytest.mark.parametrize("who", ["owner", "security", "business", "auditor", "outsider"])
def test_only_sres_and_administrators_record(request, who):
    person = request.getfixturevalue(who)

    assert not can_record_price_sheet(person)
    with pytest.raises(PermissionDenied, match="platform SREs and administrators"):
        _record(person)


def test_an_administrator_records(db):
    admin = UserFactory(username="root", is_superuser=True)

    assert can_record_price_sheet(admin)
    assert _record(admin).recorded_by == admin


def test_the_price_in_force_is_the_latest_version_on_or_before_the_day(sre):
    _record(sre, effective_from=DAY, price_per_gpu_hour="2.00")
    _record(sre, effective_from=DAY + dt.timedelta(days=30), price_per_gpu_hour="2.50")

    def price(day):
        sheet = queries.price_in_force("H100-80GB", day)
        return sheet.price_per_gpu_hour if sheet else None

    assert price(DAY - dt.timedelta(days=1)) is None
    assert price(DAY) == Decimal("2.00")
    assert price(DAY + dt.timedelta(days=29)) == Decimal("2.00")
    assert price(DAY + dt.timedelta(days=30)) == Decimal("2.50")
    versions = queries.versions_by_gpu_model()["H100-80GB"]
    assert [v.effective_from for v in versions] == [DAY + dt.timedelta(days=30), DAY]
    assert queries.prices_in_force(["H100-80GB", "L4-24GB"], DAY)["H100-80GB"] == versions[1]


def test_gpu_models_runtimes_use_without_a_price(sre, team, django_assert_num_queries):
    RuntimeFactory(team=team, name="h100", gpu_model="H100-80GB")
    live = RevisionFactory(
        service__team=team, runtime=RuntimeFactory(team=team, name="l4", gpu_model="L4-24GB")
    )
    services.set_live_revision(live.service, live, actor=None)
    RuntimeFactory(team=team, name="no-gpu-named", gpu_model="")
    _record(sre, effective_from=DAY)
    _record(sre, gpu_model="A100-80GB", effective_from=DAY + dt.timedelta(days=5))

    assert queries.unpriced_gpu_models(DAY) == ["L4-24GB"]
    # versions, runtimes, services live on each GPU model
    with django_assert_num_queries(3):
        priced, unpriced = queries.price_overview(DAY)
    assert [(g.gpu_model, g.in_force is not None) for g in priced] == [
        ("A100-80GB", False),
        ("H100-80GB", True),
    ]
    assert [(g.gpu_model, g.runtimes, g.services) for g in unpriced] == [
        ("L4-24GB", ["l4"], [live.service.slug])
    ]


def test_edge_values_are_kept_or_refused_in_words(sre):
    assert str(_record(sre, price_per_gpu_hour="-0").price_per_gpu_hour) == "0.0000"
    _record(sre, effective_from=dt.date.max)

    with pytest.raises(ValidationError) as refused:
        _record(sre, effective_from=dt.date.max)

    assert "already has a price from 9999-12-31" in refused.value.messages[0]
