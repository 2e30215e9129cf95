"""Reviews over REST: the list and its filters in constant queries, one review with its
triggers and their numbers, and the reviewer posting answers and the conclusion with a
token; refusals as 400 (naming the field), 403 (before the body is read) and 409."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone
from rest_framework.authtoken.models import Token

from ledger.models import Event
from releases.models import Review
from tests.releases.review_helpers import push_days, sweep

pytestmark = pytest.mark.django_db


@pytest.fixture
def review(world, sre):
    push_days(world.service, [950] * 7)
    sweep()
    return Review.objects.get(service=world.service)


def token(user) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Token {Token.objects.create(user=user).key}"}


def test_the_list_filters_by_service_state_and_trigger(client, auditor, review):
    headers = token(auditor)

    def ids(**params) -> list[int]:
        response = client.get("/api/reviews/", params, **headers)
        assert response.status_code == 200, response.json()
        return [row["id"] for row in response.json()["results"]]

    assert ids() == [review.pk]
    assert ids(service="kb-assistant", state="open", trigger="latency_drift") == [review.pk]
    assert ids(trigger="license") == []
    assert ids(state="concluded") == []
    refused = client.get("/api/reviews/", {"trigger": "weather"}, **headers)
    assert refused.status_code == 400
    assert "weather is not one of the allowed values" in refused.json()["trigger"][0]


@pytest.mark.parametrize("extra", [0, 5])
def test_the_list_reads_in_a_constant_number_of_queries(
    client, auditor, review, team, extra, django_assert_num_queries
):
    from tests.releases.test_review_pages import _drifting

    _drifting(team, extra)
    headers = token(auditor)
    # 1 the token and its user, 2 the count, 3 the page with services and people,
    # 4 their triggers.
    with django_assert_num_queries(4):
        response = client.get("/api/reviews/", **headers)
    assert response.json()["count"] == 1 + extra


def test_one_review_reads_with_its_triggers_numbers_and_checklist(client, auditor, review):
    response = client.get(f"/api/reviews/{review.pk}/", **token(auditor))

    body = response.json()
    assert response.status_code == 200
    assert body["service"] == "kb-assistant" and body["state"] == "open"
    trigger = body["triggers"][0]
    assert trigger["kind"] == "latency_drift"
    assert trigger["numbers"]["ttft_p95_7d_ms"] == 950.0
    assert trigger["numbers"]["slo_ttft_p95_ms"] == 800
    assert [item["key"] for item in body["checklist"]][:2] == ["versions", "license"]
    assert body["checklist"][0]["answer"] == "" and body["checklist"][0]["facts"]
    assert body["assignee"] == "sam" and body["actions"] == []


def test_the_reviewer_answers_and_concludes_with_a_token(client, sre, review):
    headers = token(sre)
    keys = list(review.items.values_list("key", flat=True))

    answered = client.post(
        f"/api/reviews/{review.pk}/checklist/",
        {"answers": [{"key": key, "answer": "ok"} for key in keys]},
        content_type="application/json",
        **headers,
    )
    assert answered.status_code == 200, answered.json()
    assert answered.json()["state"] == "in_progress"

    due = (timezone.now().date() + dt.timedelta(days=10)).isoformat()
    concluded = client.post(
        f"/api/reviews/{review.pk}/conclusion/",
        {
            "outcome": "pass_with_actions",
            "conclusion": "Tenant growth; capacity to add.",
            "actions": [{"description": "Add a replica", "owner": "sam", "due_on": due}],
        },
        content_type="application/json",
        **headers,
    )

    body = concluded.json()
    assert concluded.status_code == 200, body
    assert (body["state"], body["outcome"], body["concluded_by"]) == (
        "concluded",
        "pass_with_actions",
        "sam",
    )
    assert body["actions"][0]["owner"] == "sam" and body["actions"][0]["due_on"] == due
    event = Event.objects.get(action="review.concluded")
    assert len(event.payload_data["checklist"]) == len(keys)

    again = client.post(
        f"/api/reviews/{review.pk}/conclusion/",
        {"outcome": "fail", "conclusion": "no"},
        content_type="application/json",
        **headers,
    )
    assert again.status_code == 409
    assert "read-only" in again.json()["detail"]


def test_refusals_name_the_field(client, sre, review):
    headers = token(sre)

    bad = client.post(
        f"/api/reviews/{review.pk}/checklist/",
        {"answers": [{"key": "evidence", "answer": "action_needed"}]},
        content_type="application/json",
        **headers,
    )
    assert bad.status_code == 400
    assert "evidence.note" in bad.json()

    early = client.post(
        f"/api/reviews/{review.pk}/conclusion/",
        {"outcome": "pass"},
        content_type="application/json",
        **headers,
    )
    assert early.status_code == 400
    assert "unanswered" in early.json()["checklist"][0]


@pytest.mark.parametrize("who", ["auditor", "owner", "business"])
def test_who_may_not_conduct_is_refused_before_the_body(client, request, review, who):
    headers = token(request.getfixturevalue(who))
    events = Event.objects.count()

    for path in ("checklist", "conclusion"):
        response = client.post(
            f"/api/reviews/{review.pk}/{path}/", {}, content_type="application/json", **headers
        )
        assert response.status_code == 403, (path, response.json())
    assert Event.objects.count() == events


def test_reading_is_get_only(client, auditor, review):
    headers = token(auditor)

    assert client.delete(f"/api/reviews/{review.pk}/", **headers).status_code == 405
    assert client.get(f"/api/reviews/{review.pk}/conclusion/", **headers).status_code == 405
