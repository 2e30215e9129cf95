"""Price sheets over REST: anyone signed in reads them, platform SREs record them."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from ledger import services
from ledger.models import Event, PriceSheet

pytestmark = pytest.mark.django_db

URL = "/api/price-sheets/"
BODY = {
    "gpu_model": "H100-80GB",
    "price_per_gpu_hour": "2.4500",
    "currency": "USD",
    "effective_from": "2027-01-01",
    "note": "Cloud list price, on-demand.",
}


def _post(client, body):
    return client.post(URL, json.dumps(body), content_type="application/json")


@pytest.fixture
def sheets(db):
    for gpu, day, price in (
        ("H100-80GB", dt.date(2026, 9, 1), "2.2000"),
        ("H100-80GB", dt.date(2026, 11, 1), "2.4500"),
        ("L4-24GB", dt.date(2026, 9, 1), "0.7000"),
    ):
        services.record_price_sheet(
            actor=None, gpu_model=gpu, price_per_gpu_hour=price, currency="USD", effective_from=day
        )


def test_anyone_signed_in_lists_versions_newest_first_per_gpu_model(
    client, auditor, sheets, django_assert_num_queries
):
    client.force_login(auditor)

    # session and user, count, page of versions with who recorded them
    with django_assert_num_queries(4):
        response = client.get(URL)

    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 3
    assert [(row["gpu_model"], row["effective_from"]) for row in body["results"]] == [
        ("H100-80GB", "2026-11-01"),
        ("H100-80GB", "2026-09-01"),
        ("L4-24GB", "2026-09-01"),
    ]
    assert body["results"][0]["price_per_gpu_hour"] == "2.4500"
    assert body["results"][0]["recorded_by"] is None


def test_the_list_filters_by_gpu_model(client, auditor, sheets):
    client.force_login(auditor)

    body = client.get(URL, {"gpu_model": "L4-24GB"}).json()

    assert [row["gpu_model"] for row in body["results"]] == ["L4-24GB"]


def test_an_anonymous_caller_reads_nothing(client, sheets):
    assert client.get(URL).status_code in (401, 403)


def test_an_sre_records_a_version(client, sre):
    client.force_login(sre)

    response = _post(client, BODY)

    assert response.status_code == 201, response.content
    assert response.json()["recorded_by"] == "sam"
    assert response.json()["price_per_gpu_hour"] == "2.4500"
    sheet = PriceSheet.objects.get()
    assert sheet.effective_from == dt.date(2027, 1, 1)
    assert Event.objects.filter(action="price_sheet.recorded", actor=sre).count() == 1


def test_a_model_owner_is_refused_with_403(client, owner):
    client.force_login(owner)

    response = _post(client, BODY)

    assert response.status_code == 403
    assert "platform SREs" in response.json()["detail"]
    assert not PriceSheet.objects.exists()


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"currency": "usd"}, "currency"),
        ({"price_per_gpu_hour": "2.45001"}, "price_per_gpu_hour"),
        ({"price_per_gpu_hour": "-1"}, "price_per_gpu_hour"),
        ({"gpu_model": ""}, "gpu_model"),
        ({"effective_from": "next week"}, "effective_from"),
    ],
)
def test_bad_input_answers_400_naming_the_field(client, sre, change, field):
    client.force_login(sre)

    response = _post(client, {**BODY, **change})

    assert response.status_code == 400
    assert list(response.json()) == [field]
    assert not PriceSheet.objects.exists()


def test_a_second_version_on_a_day_answers_400_on_effective_from(client, sre):
    client.force_login(sre)
    assert _post(client, BODY).status_code == 201

    response = _post(client, {**BODY, "price_per_gpu_hour": "3"})

    assert response.status_code == 400
    assert "from 2027-01-02 or later" in response.json()["effective_from"][0]
