"""What was serving at a moment, read from the event chain: across changes, a rollback
to an earlier revision and a rollback of that rollback, through the query, the API and
the page, and in agreement with the chain's own verification."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.urls import reverse

from ledger import queries, services
from ledger.chain import verify_chain
from ledger.models import Event
from tests.ledger.factories import RevisionFactory, ServiceFactory

pytestmark = pytest.mark.django_db

T0 = dt.datetime(2026, 11, 1, 9, 0, tzinfo=dt.UTC)
HOUR = dt.timedelta(hours=1)


@pytest.fixture
def story(team):
    """r1 live at T0, r2 at T0+1h (release 7), back to r1 at T0+2h (rollback 3), then r2
    again at T0+3h (a rollback of the rollback, rollback 4)."""
    service = ServiceFactory(slug="kb-assistant", team=team)
    r1 = RevisionFactory(service=service)
    r2 = RevisionFactory(service=service, context_limit=65536)
    steps = [
        (T0, r1, {}, "first live"),
        (T0 + HOUR, r2, {"release": 7}, "release 7 reached 100 %"),
        (T0 + 2 * HOUR, r1, {"rollback": 3}, "p95 TTFT breached"),
        (T0 + 3 * HOUR, r2, {"rollback": 4}, "the rollback was the mistake"),
    ]
    for when, revision, cause, reason in steps:
        with time_machine.travel(when, tick=False):
            services.set_live_revision(service, revision, actor=None, reason=reason, cause=cause)
    return service, r1, r2


@pytest.mark.parametrize(
    ("offset", "expected", "cause", "until"),
    [
        (dt.timedelta(minutes=30), "r1", {}, T0 + HOUR),
        (HOUR, "r2", {"release": 7}, T0 + 2 * HOUR),  # the moment of the change: the new one
        (HOUR + dt.timedelta(minutes=59), "r2", {"release": 7}, T0 + 2 * HOUR),
        (2 * HOUR + dt.timedelta(seconds=1), "r1", {"rollback": 3}, T0 + 3 * HOUR),
        (30 * HOUR, "r2", {"rollback": 4}, None),
    ],
)
def test_what_was_live_at_each_moment(story, offset, expected, cause, until):
    service, *_ = story
    interval = queries.serving_at(service, T0 + offset)
    assert interval is not None
    assert interval.revision is not None
    assert (interval.revision.label, interval.cause, interval.until) == (expected, cause, until)
    assert interval.fingerprint == interval.revision.fingerprint


def test_nothing_was_live_before_the_first_change(story):
    service, *_ = story
    assert queries.serving_at(service, T0 - dt.timedelta(seconds=1)) is None


def test_the_history_is_the_chain_of_changes_newest_first(story):
    service, r1, r2 = story
    history = queries.serving_history(service)
    assert [(i.revision_id, i.since, i.until) for i in history] == [
        (r2.pk, T0 + 3 * HOUR, None),
        (r1.pk, T0 + 2 * HOUR, T0 + 3 * HOUR),
        (r2.pk, T0 + HOUR, T0 + 2 * HOUR),
        (r1.pk, T0, T0 + HOUR),
    ]
    events = Event.objects.filter(action="service.live_revision_changed").order_by("-sequence")
    assert [i.event_sequence for i in history] == [e.sequence for e in events]
    assert [i.event_hash for i in history] == [e.hash for e in events]
    assert verify_chain().ok
    assert [i.revision_id for i in queries.serving_history(service, limit=2)] == [r2.pk, r1.pk]


def test_the_answer_does_not_follow_an_edit_of_the_service_row(story):
    """The mutable column can be changed behind the ledger's back; the history cannot."""
    service, r1, r2 = story
    type(service).objects.filter(pk=service.pk).update(live_revision=r1)
    interval = queries.serving_at(service, T0 + 30 * HOUR)
    assert interval is not None and interval.revision_id == r2.pk


def test_the_api_answers_what_was_live_and_what_set_it(client, owner, story):
    service, r1, _ = story
    client.force_login(owner)
    url = f"/api/services/{service.slug}/serving/"

    body = client.get(url, {"at": "2026-11-01T11:30:00Z"}).json()

    assert body["revision"]["id"] == r1.pk
    assert body["revision"]["label"] == "r1"
    assert body["revision"]["fingerprint"] == r1.fingerprint
    assert body["since"] == "2026-11-01T11:00:00Z"
    assert body["until"] == "2026-11-01T12:00:00Z"
    assert body["set_by"]["cause"] == {"rollback": 3}
    assert body["set_by"]["reason"] == "p95 TTFT breached"
    assert body["set_by"]["actor"] == "system"
    assert client.get(url).json()["until"] is None


@pytest.mark.parametrize(
    ("at", "status", "fragment"),
    [
        (
            "2026-10-01T00:00:00Z",
            404,
            "Nothing was live on kb-assistant at 2026-10-01T00:00:00+00:00",
        ),
        ("yesterday", 400, "at"),
        ("2026-11-01T11:30:00-21:30", 400, "offsets run from -15:59 to +15:59"),
        ("2026-11-01T11:30:00\x00", 400, "at"),
    ],
)
def test_the_api_refuses_what_it_cannot_answer_naming_why(
    client, owner, story, at, status, fragment
):
    service, *_ = story
    client.force_login(owner)
    response = client.get(f"/api/services/{service.slug}/serving/", {"at": at})
    assert response.status_code == status
    assert fragment in response.content.decode()


def test_the_api_needs_a_signed_in_person(client, story):
    service, *_ = story
    assert client.get(f"/api/services/{service.slug}/serving/").status_code in (401, 403)


def test_the_page_answers_a_moment_and_lists_the_history(client, auditor, story):
    service, *_ = story
    client.force_login(auditor)
    url = reverse("ledger:serving_history", args=[service.slug])

    body = client.get(url, {"at": "2026-11-01 10:15"}).content.decode()

    answer = body.split('id="answer-heading"')[1].split("</section>")[0]
    assert "r2" in answer and "through release #7" in answer and "release 7 reached 100 %" in answer
    assert body.count('class="timeline-head"') == 5  # the answer and four intervals
    assert "live now" in body


def test_the_page_names_a_bad_moment(client, auditor, story):
    service, *_ = story
    client.force_login(auditor)
    response = client.get(reverse("ledger:serving_history", args=[service.slug]), {"at": "soon"})
    assert response.status_code == 200
    assert "Enter a valid date/time." in response.content.decode()
    assert 'id="answer-heading"' not in response.content.decode()


def test_the_service_page_shows_the_last_changes(client, auditor, story):
    service, *_ = story
    client.force_login(auditor)
    body = client.get(reverse("releases:service_detail", args=[service.slug])).content.decode()
    section = body.split('id="serving-heading"')[1].split("</section>")[0]
    assert section.count('class="timeline-head"') == 3
    assert "through rollback #4" in section
