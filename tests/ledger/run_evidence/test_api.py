"""The gateway's push and the run-summary lists over REST."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from ledger import services
from ledger.models import Event, RunSummary
from tests.factories import UserFactory
from tests.ledger.run_evidence.conftest import day

pytestmark = pytest.mark.django_db

TODAY = timezone.now().astimezone(dt.UTC).date()
YESTERDAY = TODAY - dt.timedelta(days=1)


def client_for(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return client


@pytest.fixture
def gateway(db):
    """The gateway's service account: it holds the platform role."""
    return UserFactory(username="gateway", roles=["platform_sre"])


def _push(client, slug="kb-assistant", **overrides):
    body = {"date": YESTERDAY.isoformat(), **day(**overrides)}
    return client.post(f"/api/services/{slug}/run-summaries/", body, format="json")


def test_the_gateway_pushes_a_day_and_pushing_it_again_replaces_it(service, live, gateway):
    client = client_for(gateway)

    first = _push(client)
    again = _push(client, ttft_p95_ms=900.0)
    same = _push(client, ttft_p95_ms=900.0)

    assert first.status_code == 201, first.json()
    assert first.json()["outcome"] == "recorded"
    assert first.json()["revision_label"] == live.label
    assert first.json()["recorded_by"] == "gateway"
    assert (again.status_code, again.json()["outcome"]) == (200, "replaced")
    assert (same.status_code, same.json()["outcome"]) == (200, "unchanged")
    assert RunSummary.objects.get().ttft_p95_ms == 900.0
    replaced = Event.objects.get(action="run_summary.replaced")
    assert replaced.actor == gateway
    assert replaced.payload_data["before"] == {"ttft_p95_ms": 620.0}


def test_each_refused_field_is_named(service, gateway):
    response = _push(
        client_for(gateway),
        refusal_rate=3,
        ttft_p99_ms=10.0,
        requests="many",
        date="2999-01-01",
        ttft_p95=5,
    )

    assert response.status_code == 400
    errors = response.json()
    # Types first (the serializer), then ranges (the verb): a wrong type and a
    # misspelt field are named before the rest is looked at.
    assert set(errors) == {"requests", "ttft_p95"}
    assert "ttft_p95 is not a run-summary field." in errors["ttft_p95"]

    response = _push(client_for(gateway), refusal_rate=3, ttft_p99_ms=10.0, date="2999-01-01")
    errors = response.json()
    assert response.status_code == 400
    assert set(errors) == {"refusal_rate", "ttft_p99_ms", "date"}
    assert "refusal_rate must be from 0 to 1" in errors["refusal_rate"][0]
    assert "ttft_p99_ms (10) is below ttft_p95_ms (620)" in errors["ttft_p99_ms"][0]
    assert "is in the future" in errors["date"][0]
    assert not RunSummary.objects.exists()


def test_a_revision_number_the_service_lacks_is_named(service, live, gateway):
    response = _push(client_for(gateway), revision=99)

    assert response.status_code == 400
    assert response.json() == {"revision": ["kb-assistant has no revision r99."]}


def test_who_may_push(service, owner, auditor, outsider, gateway):
    assert _push(client_for(owner)).status_code == 201
    for person in (auditor, outsider):
        response = _push(client_for(person))
        assert response.status_code == 403
        assert "platform SREs" in response.json()["detail"]
    assert APIClient().post("/api/services/kb-assistant/run-summaries/", {}).status_code == 401


def test_a_refused_caller_learns_nothing_of_the_body(service, auditor):
    response = _push(client_for(auditor), refusal_rate=7)

    assert response.status_code == 403


def test_pushing_for_a_service_that_does_not_exist_is_404(gateway):
    assert _push(client_for(gateway), slug="nope").status_code == 404


def test_lists_filter_by_service_date_and_source(
    service, live, gateway, auditor, django_assert_num_queries
):
    for offset in range(5):
        services.record_run_summary(
            service, actor=None, date=YESTERDAY - dt.timedelta(days=offset), **day()
        )
    services.record_run_summary(
        service, actor=None, date=YESTERDAY, source="scrape", requests=None, ttft_p95_ms=1.0
    )
    client = client_for(auditor)
    base = "/api/run-summaries/"

    # The token with its user, the count, the page with service, revision and recorder joined.
    with django_assert_num_queries(3):
        everything = client.get(base).json()
    assert everything["count"] == 6
    assert [r["date"] for r in everything["results"]][:2] == [YESTERDAY.isoformat()] * 2

    window = client.get(
        base,
        {
            "service": "kb-assistant",
            "source": "gateway",
            "date_after": (YESTERDAY - dt.timedelta(days=2)).isoformat(),
            "date_before": (YESTERDAY - dt.timedelta(days=1)).isoformat(),
        },
    ).json()
    assert [r["date"] for r in window["results"]] == [
        (YESTERDAY - dt.timedelta(days=n)).isoformat() for n in (1, 2)
    ]
    per_service = client.get("/api/services/kb-assistant/run-summaries/", {"source": "scrape"})
    assert per_service.status_code == 200
    assert [r["source"] for r in per_service.json()["results"]] == ["scrape"]
    one = client.get(f"{base}{RunSummary.objects.filter(source='scrape').get().pk}/").json()
    assert one["ttft_p95_ms"] == 1.0 and one["requests"] is None


@pytest.mark.parametrize(
    "query",
    [{"source": "push"}, {"date_after": "yesterday"}, {"date_before": "2026-02-30"}],
)
def test_bad_filters_are_refused(service, auditor, query):
    response = client_for(auditor).get("/api/run-summaries/", query)

    assert response.status_code == 400
    assert set(response.json()) == set(query)
