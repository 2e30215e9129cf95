"""The breakdown over REST: pushed with the day, refused by path, listed per day."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from ledger import services
from ledger.models import RunBreakdown
from tests.ledger.run_evidence.conftest import breakdown_row, breakdown_rows, day_with_rows
from tests.ledger.run_evidence.test_api import client_for

pytestmark = pytest.mark.django_db

YESTERDAY = timezone.now().astimezone(dt.UTC).date() - dt.timedelta(days=1)
PUSH = "/api/services/kb-assistant/run-summaries/"


def _breakdown_url(date: dt.date | str = YESTERDAY) -> str:
    day = date if isinstance(date, str) else date.isoformat()
    return f"/api/services/kb-assistant/run-summaries/{day}/breakdown/"


def test_the_gateway_pushes_a_day_with_its_rows(service, live, sre):
    rows = breakdown_rows(30)
    body = {"date": YESTERDAY.isoformat(), **day_with_rows(rows)}

    first = client_for(sre).post(PUSH, body, format="json")
    again = client_for(sre).post(PUSH, body, format="json")

    assert first.status_code == 201, first.json()
    assert first.json()["breakdown_rows"] == 30
    assert first.json()["input_tokens"] == sum(row["input_tokens"] for row in rows)
    assert (again.status_code, again.json()["outcome"]) == (200, "unchanged")
    assert RunBreakdown.objects.count() == 30


def test_totals_may_be_left_to_the_rows(service, live, sre):
    rows = breakdown_rows(3)

    response = client_for(sre).post(
        PUSH, {"date": YESTERDAY.isoformat(), "breakdown": rows}, format="json"
    )

    assert response.status_code == 201, response.json()
    assert response.json()["requests"] == 1203


def test_refusals_name_the_row_field_and_both_numbers(service, live, sre):
    rows = breakdown_rows(4)
    rows[3] = breakdown_row(3, tenant="acme")
    body = {"date": YESTERDAY.isoformat(), **day_with_rows(breakdown_rows(4)), "breakdown": rows}
    body["output_tokens"] += 5

    response = client_for(sre).post(PUSH, body, format="json")

    assert response.status_code == 400
    errors = response.json()
    assert set(errors) == {"breakdown[3].tenant"}
    assert "'acme' is not one of kb-assistant's tenants" in errors["breakdown[3].tenant"][0]

    rows = breakdown_rows(4)
    body = {"date": YESTERDAY.isoformat(), **day_with_rows(rows)}
    body["output_tokens"] += 5
    response = client_for(sre).post(PUSH, body, format="json")
    summed = sum(row["output_tokens"] for row in rows)
    assert response.json() == {
        "output_tokens": [
            f"output_tokens is {summed + 5} but the breakdown rows add up to {summed}."
        ]
    }
    assert not RunBreakdown.objects.exists()


def test_breakdown_must_be_a_list(service, sre):
    response = client_for(sre).post(
        PUSH, {"date": YESTERDAY.isoformat(), "requests": 1, "breakdown": "all"}, format="json"
    )

    assert response.status_code == 400
    assert "breakdown must be a list of rows" in response.json()["breakdown"][0]


def test_anyone_signed_in_reads_a_day_s_rows_page_by_page(
    service, live, auditor, django_assert_num_queries
):
    services.record_run_summary(
        service, actor=None, date=YESTERDAY, **day_with_rows(breakdown_rows(60))
    )
    client = client_for(auditor)

    # The token with its user, the day, the rows' count, the page of rows.
    with django_assert_num_queries(4):
        first = client.get(_breakdown_url())
    assert first.status_code == 200
    page = first.json()
    assert page["count"] == 60 and len(page["results"]) == 50 and page["next"]
    row = page["results"][0]
    assert (row["tenant"], row["task_type"], row["backend"]) == ("finance", "chat", "vllm-0")
    assert row["latency"]["ttft_p95_ms"] == 500.0
    assert row["errors_4xx"] == 2

    support_sql = client.get(_breakdown_url(), {"tenant": "support", "task_type": "sql"}).json()
    assert {(r["tenant"], r["task_type"]) for r in support_sql["results"]} == {("support", "sql")}
    assert support_sql["count"] == 5


def test_the_day_lists_count_each_day_s_rows(service, live, auditor, django_assert_num_queries):
    services.record_run_summary(
        service, actor=None, date=YESTERDAY, **day_with_rows(breakdown_rows(7))
    )
    services.record_run_summary(
        service,
        actor=None,
        date=YESTERDAY - dt.timedelta(days=1),
        **day_with_rows(breakdown_rows(2)),
    )
    client = client_for(auditor)

    # The token with its user, the count, the page with each day's rows counted.
    with django_assert_num_queries(3):
        days = client.get("/api/run-summaries/").json()["results"]
    assert [d["breakdown_rows"] for d in days] == [7, 2]
    listed = client.get("/api/services/kb-assistant/run-summaries/").json()["results"]
    assert [d["breakdown_rows"] for d in listed] == [7, 2]


def test_a_day_not_recorded_is_404_and_a_bad_day_or_source_400(service, auditor):
    client = client_for(auditor)

    assert client.get(_breakdown_url()).status_code == 404
    assert client.get(_breakdown_url().replace("kb-assistant", "nope")).status_code == 404
    bad_day = client.get(_breakdown_url("yesterday"))
    assert bad_day.status_code == 400
    assert bad_day.json() == {"date": ["date must be a day, YYYY-MM-DD; got 'yesterday'."]}
    assert client.get(_breakdown_url(), {"source": "push"}).status_code == 400


def test_the_rows_need_a_signed_in_reader(service, live):
    assert APIClient().get(_breakdown_url()).status_code == 401


def test_a_push_of_the_most_rows_with_the_longest_values_fits_the_body_limit(settings):
    """Django refuses a body over DATA_UPLOAD_MAX_MEMORY_SIZE before the view reads it:
    the bound on rows, not the body size, must be what refuses a push."""
    big = 10**15
    row = {
        "tenant": "t" * 80,
        "task_type": "k" * 40,
        "backend": "b" * 120,
        **{
            name: big
            for name in (
                "requests",
                "input_tokens",
                "output_tokens",
                "errors_4xx",
                "errors_5xx",
                "rate_limit_hits",
                "timeouts",
                "retries",
                "truncations",
                "refusals",
                "structured_errors",
                "returned_by_humans",
            )
        },
        "error_counts": {code: big for code in ("400", "429", "500", "503", "504")},
        "degradations": {"shorter-context": big, "fallback-model": big},
        "latency": {name: 123456.789012345 for name in breakdown_row(0)["latency"]},
    }
    rows = settings.RUN_BREAKDOWN_MAX_ROWS
    body = len(json.dumps({"breakdown": [row] * rows}, indent=2))

    assert body <= settings.DATA_UPLOAD_MAX_MEMORY_SIZE


def test_the_documented_example_is_accepted_as_documented(service, live, sre):
    # docs/run-evidence.md, "By tenant and task type".
    body = {
        "date": YESTERDAY.isoformat(),
        "requests": 1200,
        "output_tokens": 300000,
        "error_counts": {"429": 6, "503": 2},
        "rate_4xx": 0.005,
        "breakdown": [
            {
                "tenant": "support",
                "task_type": "chat",
                "backend": "kb-r3-a",
                "requests": 700,
                "input_tokens": 600000,
                "output_tokens": 180000,
                "error_counts": {"429": 5, "503": 1},
                "rate_limit_hits": 5,
                "refusals": 3,
                "latency": {"ttft_p50_ms": 170, "ttft_p95_ms": 600, "ttft_p99_ms": 1000},
            },
            {
                "tenant": "sales",
                "task_type": "rag",
                "backend": "kb-r3-a",
                "requests": 450,
                "input_tokens": 500000,
                "output_tokens": 110000,
                "error_counts": {"429": 1, "503": 1},
                "rate_limit_hits": 1,
            },
            {
                "tenant": "unattributed",
                "task_type": "unattributed",
                "requests": 50,
                "output_tokens": 10000,
            },
        ],
    }

    response = client_for(sre).post(PUSH, body, format="json")

    assert response.status_code == 201, response.json()
    day = response.json()
    assert (day["input_tokens"], day["rate_limit_hits"], day["breakdown_rows"]) == (
        1_100_000,
        6,
        3,
    )
