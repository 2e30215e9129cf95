"""record_run_summary: every field checked and named, one row per day and source,
the same day again replaced (and the Event says so), nothing written on refusal."""

from __future__ import annotations

import datetime as dt
import threading

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connection
from django.utils import timezone

from ledger import services
from ledger.models import Event, RunSummary
from tests.ledger.factories import RevisionFactory
from tests.ledger.run_evidence.conftest import day

pytestmark = pytest.mark.django_db

YESTERDAY = timezone.now().astimezone(dt.UTC).date() - dt.timedelta(days=1)


def _errors(service, **fields) -> dict[str, list[str]]:
    date = fields.pop("date", YESTERDAY)
    with pytest.raises(ValidationError) as caught:
        services.record_run_summary(service, actor=None, date=date, **fields)
    return caught.value.message_dict


def test_a_day_is_recorded_with_its_event_and_the_live_revision(service, live):
    summary, outcome = services.record_run_summary(service, actor=None, date=YESTERDAY, **day())

    assert outcome == "recorded"
    assert summary.source == "gateway" and summary.revision == live
    assert summary.error_rate == pytest.approx(36 / 12000)
    event = Event.objects.get(action="run_summary.recorded")
    assert event.service_id == service.pk
    payload = event.payload_data
    assert payload["date"] == YESTERDAY.isoformat()
    assert payload["replaced"] is False
    assert payload["ttft_p95_ms"] == 620.0
    assert payload["revision"] == live.pk


def test_posting_the_same_day_again_replaces_it_and_the_event_says_so(service, live):
    first, _ = services.record_run_summary(service, actor=None, date=YESTERDAY, **day())

    again, outcome = services.record_run_summary(
        service, actor=None, date=YESTERDAY, **day(ttft_p95_ms=700.0, requests=12500)
    )

    assert outcome == "replaced"
    assert again.pk == first.pk
    assert RunSummary.objects.count() == 1
    assert RunSummary.objects.get().ttft_p95_ms == 700.0
    event = Event.objects.get(action="run_summary.replaced")
    payload = event.payload_data
    assert payload["replaced"] is True
    assert payload["changed"] == ["error_rate", "requests", "ttft_p95_ms"]
    assert payload["before"]["ttft_p95_ms"] == 620.0
    assert payload["ttft_p95_ms"] == 700.0


def test_the_same_numbers_again_record_nothing(service, live):
    services.record_run_summary(service, actor=None, date=YESTERDAY, **day())
    count = Event.objects.count()

    _, outcome = services.record_run_summary(service, actor=None, date=YESTERDAY, **day())

    assert outcome == "unchanged"
    assert Event.objects.count() == count


def test_gateway_and_scrape_days_are_kept_apart(service, live):
    services.record_run_summary(service, actor=None, date=YESTERDAY, **day())
    services.record_run_summary(
        service, actor=None, date=YESTERDAY, source="scrape", requests=None, ttft_p95_ms=500.0
    )

    assert sorted(RunSummary.objects.values_list("source", flat=True)) == ["gateway", "scrape"]


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("refusal_rate", 1.5, "refusal_rate must be from 0 to 1"),
        ("cache_hit_rate", -0.1, "cache_hit_rate must be from 0 to 1"),
        ("rate_5xx", "lots", "rate_5xx must be a number from 0 to 1"),
        ("truncation_rate", float("nan"), "truncation_rate must be a number from 0 to 1"),
        ("requests", -3, "requests must not be negative"),
        ("requests", 2.5, "requests must be a whole number"),
        ("timeouts", True, "timeouts must be a whole number"),
        ("retries", -1, "retries must not be negative"),
        ("ttft_p95_ms", -5, "ttft_p95_ms must be a number of milliseconds"),
        ("ttft_p95_ms", 100.0, "ttft_p95_ms (100) is below ttft_p50_ms (180)"),
        ("e2e_p99_ms", 5000.0, "e2e_p99_ms (5000) is below e2e_p95_ms (5200)"),
        ("error_counts", {"503": -1}, "error_counts['503'] must be a whole number"),
        ("error_counts", {"503": 20000}, "more than the 12000 requests"),
        ("error_counts", [1, 2], "error_counts must be an object"),
        ("degradations", {"shorter-context": 99999}, "degradations['shorter-context'] is 99999"),
        ("colour", "blue", "colour is not a run-summary field"),
    ],
)
def test_each_bad_field_is_refused_with_a_message_naming_it(service, field, value, words):
    errors = _errors(service, **day(**{field: value}))

    assert field in errors
    assert any(words in message for message in errors[field]), errors[field]
    assert not RunSummary.objects.exists()
    assert not Event.objects.filter(action__startswith="run_summary").exists()


def test_every_wrong_field_is_named_at_once(service):
    errors = _errors(service, **day(refusal_rate=2, requests=-1, tpot_p99_ms=1.0))

    assert {"refusal_rate", "requests", "tpot_p99_ms"} <= set(errors)


def test_a_day_in_the_future_is_refused(service):
    tomorrow = timezone.now().astimezone(dt.UTC).date() + dt.timedelta(days=1)

    errors = _errors(service, date=tomorrow, **day())

    assert "is in the future" in errors["date"][0]


def test_the_gateway_must_say_how_many_requests(service):
    fields = day()
    del fields["requests"]

    errors = _errors(service, **fields)

    assert "requests is required" in errors["requests"][0]


def test_a_revision_of_another_service_is_refused(service):
    other = RevisionFactory()

    with pytest.raises(ValidationError) as caught:
        services.record_run_summary(service, actor=None, date=YESTERDAY, revision=other, **day())

    assert "belongs to another service" in caught.value.message_dict["revision"][0]


def test_only_platform_sres_and_the_team_push_run_summaries(service, owner, sre, auditor, outsider):
    services.record_run_summary(service, actor=owner, date=YESTERDAY, **day())
    services.record_run_summary(service, actor=sre, date=YESTERDAY, **day(requests=13000))
    for person in (auditor, outsider):
        with pytest.raises(PermissionDenied):
            services.record_run_summary(service, actor=person, date=YESTERDAY, **day())

    assert RunSummary.objects.get().recorded_by == sre


@pytest.mark.django_db(transaction=True)
def test_two_pushes_of_a_new_day_at_once_make_one_row_and_a_replaced_event(service, live):
    barrier = threading.Barrier(2)
    outcomes, failures = [], []

    def push(requests: int) -> None:
        try:
            barrier.wait(10)
            _, outcome = services.record_run_summary(
                service, actor=None, date=YESTERDAY, **day(requests=requests)
            )
            outcomes.append(outcome)
        except Exception as exc:
            failures.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=push, args=(n,)) for n in (12000, 13000)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert failures == []
    assert sorted(outcomes) == ["recorded", "replaced"]
    assert RunSummary.objects.count() == 1
