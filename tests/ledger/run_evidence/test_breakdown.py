"""A day's breakdown by tenant, task type and backend: the rows checked and named by
their path, the totals the rows' sums, the rows replaced with the day in one
transaction, and their digest (not the rows) in the Event."""

from __future__ import annotations

import datetime as dt

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from ledger import services
from ledger.models import Event, RunBreakdown, RunSummary
from ledger.services.run_evidence import (
    BREAKDOWN_COLUMNS,
    MAX_COUNT,
    breakdown_sha256,
    clean_breakdown,
)
from tests.ledger.run_evidence.conftest import (
    breakdown_row,
    breakdown_rows,
    day,
    day_with_rows,
    totals_of,
)

pytestmark = pytest.mark.django_db

YESTERDAY = timezone.now().astimezone(dt.UTC).date() - dt.timedelta(days=1)


def _record(service, fields, *, date=YESTERDAY, actor=None):
    return services.record_run_summary(service, actor=actor, date=date, **fields)


def _errors(service, fields, *, date=YESTERDAY) -> dict[str, list[str]]:
    with pytest.raises(ValidationError) as caught:
        _record(service, fields, date=date)
    return caught.value.message_dict


def _cleaned_rows(service, rows):
    errors: dict[str, str] = {}
    clean = clean_breakdown(rows, service=service, errors=errors)
    assert errors == {}
    return clean.rows


def test_a_day_with_rows_is_recorded_and_the_event_holds_their_digest_not_the_rows(service, live):
    rows = breakdown_rows(24)

    summary, outcome = _record(service, day_with_rows(rows))

    assert outcome == "recorded"
    stored = RunBreakdown.objects.filter(summary=summary)
    assert stored.count() == 24
    first = stored.get(tenant="finance", task_type="chat", backend="vllm-0")
    assert (first.requests, first.errors_4xx, first.errors_5xx) == (400, 2, 0)
    assert first.ttft_p95_ms == 500.0 and first.tpot_p99_ms == 30.0
    assert first.degradations == {"shorter-context": 0}
    assert summary.requests == sum(row["requests"] for row in rows)
    assert summary.input_tokens == totals_of(rows)["input_tokens"]
    event = Event.objects.get(action="run_summary.recorded")
    assert event.payload_data["breakdown_rows"] == 24
    assert event.payload_data["breakdown_sha256"] == breakdown_sha256(_cleaned_rows(service, rows))
    assert "vllm-0" not in event.payload


def test_a_day_without_breakdown_has_no_rows_and_says_so(service, live):
    _record(service, day())

    assert not RunBreakdown.objects.exists()
    payload = Event.objects.get(action="run_summary.recorded").payload_data
    assert (payload["breakdown_rows"], payload["breakdown_sha256"]) == (0, None)


def test_totals_left_out_are_the_rows_sums(service, live):
    rows = breakdown_rows(12)

    summary, _ = _record(service, {"breakdown": rows})

    totals = totals_of(rows)
    for name in ("requests", "input_tokens", "output_tokens", "timeouts", "returned_by_humans"):
        assert getattr(summary, name) == totals[name], name
    assert summary.error_counts == {"429": 24, "503": 6}
    assert summary.degradations == {"shorter-context": totals["degradations"]["shorter-context"]}
    assert summary.error_rate == pytest.approx(30 / totals["requests"])
    # A rate is not a count: left out, it stays unknown.
    assert summary.rate_4xx is None


def test_a_count_no_row_gave_stays_unknown_in_the_totals(service, live):
    rows = [
        {"tenant": "support", "task_type": "chat", "requests": 10},
        {"tenant": "sales", "task_type": "chat", "requests": 5},
    ]

    summary, _ = _record(service, {"breakdown": rows})

    assert summary.requests == 15
    assert summary.input_tokens is None and summary.timeouts is None


@pytest.mark.parametrize(
    "name",
    [
        "requests",
        "input_tokens",
        "output_tokens",
        "rate_limit_hits",
        "timeouts",
        "retries",
        "returned_by_humans",
    ],
)
def test_a_total_that_is_not_the_rows_sum_is_refused_naming_both_numbers(service, name):
    rows = breakdown_rows(12)
    summed = totals_of(rows)[name]

    errors = _errors(service, day_with_rows(rows, **{name: summed + 10}))

    assert errors == {name: [f"{name} is {summed + 10} but the breakdown rows add up to {summed}."]}
    assert not RunSummary.objects.exists()


def test_each_error_code_and_degradation_must_be_the_rows_sum(service):
    rows = breakdown_rows(12)

    errors = _errors(
        service,
        day_with_rows(
            rows, error_counts={"429": 24, "503": 9, "400": 1}, degradations={"queued": 2}
        ),
    )

    assert errors["error_counts"] == [
        "error_counts['400'] is 1 but the breakdown rows add up to 0. "
        "error_counts['503'] is 9 but the breakdown rows add up to 6."
    ]
    summed = totals_of(rows)["degradations"]["shorter-context"]
    assert errors["degradations"] == [
        "degradations['queued'] is 2 but the breakdown rows add up to 0. "
        f"degradations['shorter-context'] is 0 but the breakdown rows add up to {summed}."
    ]


def test_a_rate_more_than_one_request_off_the_rows_count_is_refused(service, live):
    rows = breakdown_rows(12)
    totals = totals_of(rows)
    requests = totals["requests"]
    # Within one request of the rows' 24 errors: accepted.
    _record(service, day_with_rows(rows, rate_4xx=(24 + 0.9) / requests))

    errors = _errors(service, day_with_rows(rows, rate_4xx=0.02, refusal_rate=0.5))

    expected = 0.02 * requests
    assert errors["rate_4xx"] == [
        f"rate_4xx is 0.02, {expected:g} of the {requests} requests, but the breakdown rows' "
        "errors_4xx add up to 24."
    ]
    assert "but the breakdown rows' refusals add up to 24." in errors["refusal_rate"][0]


def test_a_rate_is_not_checked_against_a_count_no_row_gave(service, live):
    rows = [{"tenant": "support", "task_type": "chat", "requests": 100}]

    summary, _ = _record(service, {"requests": 100, "refusal_rate": 0.1, "breakdown": rows})

    assert summary.refusal_rate == 0.1


@pytest.mark.parametrize(
    ("overrides", "path", "words"),
    [
        ({"tenant": "acme"}, "tenant", "'acme' is not one of kb-assistant's tenants"),
        ({"tenant": None}, "tenant", "breakdown[1].tenant is required"),
        ({"task_type": "poetry"}, "task_type", "'poetry' is not one of kb-assistant's task types"),
        ({"requests": -1}, "requests", "breakdown[1].requests must not be negative; got -1."),
        ({"requests": None}, "requests", "breakdown[1].requests is required"),
        ({"timeouts": 2.5}, "timeouts", "breakdown[1].timeouts must be a whole number"),
        ({"retries": MAX_COUNT + 1}, "retries", "more than any day holds"),
        ({"error_counts": {"503": -2}}, "error_counts", "error_counts['503'] must be a whole"),
        ({"latency": {"ttft_p50_ms": -3}}, "ttft_p50_ms", "must be a number of milliseconds"),
        (
            {"latency": {"ttft_p50_ms": 700.0, "ttft_p95_ms": 600.0}},
            "ttft_p95_ms",
            "breakdown[1].ttft_p95_ms (600) is below breakdown[1].ttft_p50_ms (700)",
        ),
        (
            {"latency": {**breakdown_row(1)["latency"], "tpot_p99_ms": 5.0}},
            "tpot_p99_ms",
            "breakdown[1].tpot_p99_ms (5) is below breakdown[1].tpot_p95_ms (24)",
        ),
        ({"ttft_p50_ms": 100.0}, "ttft_p50_ms", "is given twice"),
        ({"latency": {"itl_p50_ms": 1}}, "latency.itl_p50_ms", "is not a latency field"),
        (
            {"errors_4xx": 1},
            "errors_4xx",
            "breakdown[1].errors_4xx is 1 but its error_counts' 4xx codes add up to 2.",
        ),
        (
            {"errors_5xx": 3},
            "errors_5xx",
            "breakdown[1].errors_5xx is 3 but its error_counts' 5xx codes add up to 1.",
        ),
        (
            {"requests": 2, "error_counts": {"429": 2, "503": 1}},
            "requests",
            "breakdown[1] has 3 failed requests, more than its 2 requests.",
        ),
        ({"colour": "blue"}, "colour", "breakdown[1].colour is not a breakdown field."),
        ({"backend": 7}, "backend", "breakdown[1].backend must be the backend's name"),
    ],
)
def test_each_row_fault_is_refused_naming_its_path(service, overrides, path, words):
    rows = breakdown_rows(3)
    rows[1] = breakdown_row(1, **overrides)

    errors = _errors(service, {"requests": 1203, "breakdown": rows})

    key = f"breakdown[1].{path}"
    assert key in errors, errors
    assert any(words in message for message in errors[key]), errors[key]
    assert not RunSummary.objects.exists()


def test_an_unknown_tenant_is_refused_listing_the_service_s_own(service):
    rows = [breakdown_row(0, tenant="acme")]

    errors = _errors(service, {"breakdown": rows})

    assert errors["breakdown[0].tenant"] == [
        "breakdown[0].tenant 'acme' is not one of kb-assistant's tenants (finance, sales, "
        "support); send “unattributed” when the gateway could not tell."
    ]


def test_unattributed_tenant_and_task_type_are_recorded(service, live):
    rows = [
        breakdown_row(0),
        breakdown_row(1, tenant="unattributed", task_type="unattributed"),
    ]

    summary, _ = _record(service, {"breakdown": rows})

    assert set(summary.breakdown.values_list("tenant", "task_type")) == {
        ("finance", "chat"),
        ("unattributed", "unattributed"),
    }


def test_a_repeated_tenant_task_type_and_backend_names_both_rows(service):
    rows = [*breakdown_rows(4), breakdown_row(2, requests=5)]

    errors = _errors(service, {"breakdown": rows})

    assert errors == {
        "breakdown[4]": [
            "breakdown[4] repeats breakdown[2]: tenant 'support', task type 'chat', backend "
            "'vllm-0' (one row per tenant, task type and backend)."
        ]
    }


def test_more_rows_than_the_bound_are_refused_with_the_count(service, settings):
    settings.RUN_BREAKDOWN_MAX_ROWS = 5

    errors = _errors(service, {"breakdown": breakdown_rows(6)})

    assert errors == {
        "breakdown": [
            "breakdown has 6 rows; at most 5 are accepted in one push (one per tenant, task "
            "type and backend)."
        ]
    }


def test_a_push_of_many_faulty_rows_names_the_first_fifty(service):
    rows = [breakdown_row(index, tenant="acme") for index in range(80)]

    errors = _errors(service, {"breakdown": rows})

    assert len([key for key in errors if key.startswith("breakdown[")]) == 50
    assert errors["breakdown"] == ["breakdown has 80 faults; the first 50 are named."]


def test_faults_of_the_day_and_of_its_rows_are_named_at_once(service):
    rows = breakdown_rows(3)
    rows[2]["tenant"] = "acme"

    errors = _errors(service, {**day_with_rows(rows), "refusal_rate": 2, "breakdown": rows})

    assert {"refusal_rate", "breakdown[2].tenant"} <= set(errors)


def test_breakdown_must_be_a_list_of_objects(service):
    assert "must be a list of rows" in _errors(service, {"breakdown": {"a": 1}})["breakdown"][0]
    errors = _errors(service, {"breakdown": ["row"]})
    assert errors["breakdown[0]"] == [
        "breakdown[0] must be an object (tenant, task_type, backend and counts)."
    ]


# ---------------------------------------------------------------- again: replaced, unchanged


def test_the_same_day_and_rows_again_are_unchanged(service, live):
    rows = breakdown_rows(12)
    _record(service, day_with_rows(rows))
    events = Event.objects.count()
    ids = set(RunBreakdown.objects.values_list("pk", flat=True))

    _, outcome = _record(service, day_with_rows(list(reversed(rows))))

    assert outcome == "unchanged"
    assert Event.objects.count() == events
    assert set(RunBreakdown.objects.values_list("pk", flat=True)) == ids


def test_other_rows_for_the_day_replace_the_old_ones_and_the_event_says_so(service, live):
    old = breakdown_rows(12)
    first, _ = _record(service, day_with_rows(old))
    new = breakdown_rows(6)

    summary, outcome = _record(service, day_with_rows(new))

    assert outcome == "replaced"
    assert summary.pk == first.pk
    assert summary.breakdown.count() == 6
    assert RunBreakdown.objects.count() == 6
    payload = Event.objects.get(action="run_summary.replaced").payload_data
    assert {"breakdown_sha256", "breakdown_rows", "requests"} <= set(payload["changed"])
    assert payload["before"]["breakdown_rows"] == 12
    assert payload["breakdown_rows"] == 6
    assert payload["breakdown_sha256"] == breakdown_sha256(_cleaned_rows(service, new))


def test_a_row_changed_alone_is_a_replaced_breakdown(service, live):
    rows = breakdown_rows(3)
    _record(service, day_with_rows(rows))
    rows[0] = {**rows[0], "latency": {**rows[0]["latency"], "ttft_p99_ms": 2000.0}}

    _, outcome = _record(service, day_with_rows(rows))

    assert outcome == "replaced"
    payload = Event.objects.get(action="run_summary.replaced").payload_data
    assert payload["changed"] == ["breakdown_sha256"]
    assert RunBreakdown.objects.get(tenant="finance", task_type="chat").ttft_p99_ms == 2000.0


def test_a_push_without_breakdown_keeps_the_rows_while_their_totals_hold(service, live):
    rows = breakdown_rows(6)
    _record(service, day_with_rows(rows))
    totals_only = {k: v for k, v in day_with_rows(rows).items() if k != "breakdown"}

    _, same = _record(service, totals_only)
    _, faster = _record(service, {**totals_only, "ttft_p95_ms": 700.0})
    errors = _errors(service, {**totals_only, "requests": totals_only["requests"] + 1})

    assert (same, faster) == ("unchanged", "replaced")
    assert RunBreakdown.objects.count() == 6
    assert errors == {
        "breakdown": [
            "This day has 6 breakdown rows and requests would no longer be their sum: push the "
            "rows again with the totals, or breakdown: [] to drop them."
        ]
    }


def test_an_empty_breakdown_drops_the_day_s_rows(service, live):
    rows = breakdown_rows(6)
    _record(service, day_with_rows(rows))

    _, outcome = _record(service, {**day(), "breakdown": []})

    assert outcome == "replaced"
    assert not RunBreakdown.objects.exists()
    payload = Event.objects.get(action="run_summary.replaced").payload_data
    assert (payload["breakdown_rows"], payload["breakdown_sha256"]) == (0, None)


def test_a_refused_push_leaves_the_day_and_its_rows_as_they_were(service, live):
    rows = breakdown_rows(6)
    summary, _ = _record(service, day_with_rows(rows))
    before = list(RunBreakdown.objects.values())

    _errors(service, day_with_rows(breakdown_rows(4), requests=1))

    assert list(RunBreakdown.objects.values()) == before
    assert RunSummary.objects.get().requests == summary.requests


def test_a_failure_after_the_rows_are_written_undoes_the_whole_push(service, live, monkeypatch):
    rows = breakdown_rows(6)
    summary, _ = _record(service, day_with_rows(rows))
    before = list(RunBreakdown.objects.values())
    events = Event.objects.count()

    def fail(**kwargs):
        raise RuntimeError("the ledger is unavailable")

    monkeypatch.setattr("ledger.services.run_evidence.append_event", fail)
    with pytest.raises(RuntimeError):
        _record(service, day_with_rows(breakdown_rows(3)))

    assert list(RunBreakdown.objects.values()) == before
    assert RunSummary.objects.get().requests == summary.requests
    assert Event.objects.count() == events


def test_the_push_s_queries_do_not_grow_with_its_rows(service, live, django_assert_num_queries):
    with CaptureQueriesContext(connection) as few:
        _record(service, day_with_rows(breakdown_rows(10)))

    # The service (with its team), its task types, the lock, the day, the summary's
    # INSERT, the chain's lock, head and INSERT (the rows' COPY is not in Django's query
    # log); then the day's cost, stored in the same transaction (releases.cost.services):
    # the old rows' DELETE, the day's summary, its revision's routed backends, load
    # tests, release and runtime, the price sheets and the breakdown rows (the parts'
    # COPY is not in the log either). The same for 10 rows and for 500.
    with django_assert_num_queries(len(few.captured_queries)):
        _record(service, day_with_rows(breakdown_rows(500)), date=YESTERDAY - dt.timedelta(days=1))
    assert len(few.captured_queries) <= 21


def test_the_rows_copy_writes_every_column_of_the_model():
    # The COPY names its columns: a column added to RunBreakdown must be added there too.
    model_columns = {
        field.name
        for field in RunBreakdown._meta.concrete_fields
        if field.name not in {"id", "summary"}
    }
    assert set(BREAKDOWN_COLUMNS) == model_columns
    assert len(BREAKDOWN_COLUMNS) == len(model_columns)
