"""The review pages end to end through the client: the lists (filters in the URL, empty
states, constant queries), the review page and its checklist, concluding after a
confirmation, actions on the service page, the catalog and home; and the 403/405 cases."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.urls import reverse
from django.utils import timezone

from ledger import services as ledger_services
from ledger.models import Event
from releases.models import Review, ReviewAction
from releases.reviews.services import periodic_reviews as verbs
from tests.ledger.factories import RevisionFactory, ServiceFactory
from tests.releases.review_helpers import answer_all, push_days, sweep

pytestmark = pytest.mark.django_db


@pytest.fixture
def review(world, sre):
    push_days(world.service, [950] * 7)
    sweep()
    return Review.objects.get(service=world.service)


def _drifting(team, count: int) -> None:
    """`count` more services whose latency drifted, one review each."""
    for n in range(count):
        service = ServiceFactory(slug=f"drift-{n}", team=team, slo_ttft_p95_ms=500)
        ledger_services.set_live_revision(service, RevisionFactory(service=service), actor=None)
        push_days(service, [900] * 3)
    sweep()


# ---------------------------------------------------------------- lists


def test_the_list_filters_by_state_service_tier_trigger_and_period(client, auditor, review, team):
    _drifting(team, 2)
    client.force_login(auditor)

    everything = client.get(reverse("releases:review_list"))
    kb = client.get(
        reverse("releases:review_list"), {"service": "kb-assistant", "tier": "production"}
    )
    latency = client.get(reverse("releases:review_list"), {"trigger": "latency_drift"})
    licenses = client.get(reverse("releases:review_list"), {"trigger": "license"})
    today = timezone.now().date().isoformat()
    period = client.get(reverse("releases:review_list"), {"date_from": today, "date_to": today})
    concluded = client.get(reverse("releases:review_list"), {"state": "concluded"})

    assert everything.context["page"].paginator.count == 3
    assert [r.pk for r in kb.context["page"]] == [review.pk]
    assert latency.context["page"].paginator.count == 3
    assert period.context["page"].paginator.count == 3
    assert licenses.context["page"].paginator.count == 0
    assert "No review matches these filters" in licenses.content.decode()
    assert concluded.context["page"].paginator.count == 0
    body = kb.content.decode()
    assert "Latency drift" in body and '<span class="badge warn">open</span>' in body


def test_the_list_says_what_to_do_when_there_is_nothing(client, auditor):
    client.force_login(auditor)

    response = client.get(reverse("releases:review_list"))

    assert response.status_code == 200
    assert "No review has been raised yet" in response.content.decode()
    assert "manage.py raise_reviews" in response.content.decode()


def test_htmx_filters_get_only_the_results(client, auditor, review):
    client.force_login(auditor)

    response = client.get(
        reverse("releases:review_list"), {"state": "open"}, HTTP_HX_REQUEST="true"
    )

    body = response.content.decode()
    assert "<html" not in body
    assert f"#{review.pk}" in body
    assert response["HX-Push-Url"] == "/reviews/?state=open"


@pytest.mark.parametrize("extra", [0, 6])
def test_the_list_reads_in_a_constant_number_of_queries(
    client, auditor, review, team, extra, django_assert_num_queries
):
    _drifting(team, extra)
    client.force_login(auditor)
    client.get(reverse("releases:review_list"))  # the session and the roles, cached

    # 1 session, 2 user, 3 the count, 4 the page of reviews with their services and
    # people, 5 their triggers.
    with django_assert_num_queries(5):
        response = client.get(reverse("releases:review_list"))
    assert len(response.context["page"]) == 1 + extra


@pytest.mark.parametrize("extra", [0, 6])
def test_my_reviews_are_due_soonest_first_in_constant_queries(
    client, sre, review, team, extra, django_assert_num_queries
):
    _drifting(team, extra)
    client.force_login(sre)
    client.get(reverse("releases:my_reviews"))

    # 1 session, 2 user, 3 the count, 4 the page, 5 their triggers, 6 the user's roles.
    with django_assert_num_queries(6):
        response = client.get(reverse("releases:my_reviews"))
    dues = [r.due_on for r in response.context["page"]]
    assert dues == sorted(dues) and len(dues) == 1 + extra


def test_my_reviews_flags_an_overdue_one_with_a_word(client, sre, review):
    with time_machine.travel(timezone.now() + dt.timedelta(days=15), tick=False):
        client.force_login(sre)  # a session of 15 days ago would have expired
        response = client.get(reverse("releases:my_reviews"))

    assert '<span class="badge bad">overdue</span>' in response.content.decode()


def test_my_reviews_without_any_says_so(client, owner):
    client.force_login(owner)

    response = client.get(reverse("releases:my_reviews"))

    assert "No review is assigned to you" in response.content.decode()


def test_lists_are_get_only(client, sre):
    client.force_login(sre)

    assert client.post(reverse("releases:review_list")).status_code == 405
    assert client.post(reverse("releases:my_reviews")).status_code == 405


# ---------------------------------------------------------------- the review page


def test_the_review_page_shows_triggers_with_numbers_and_the_checklist_form(client, sre, review):
    client.force_login(sre)

    response = client.get(reverse("releases:review_detail", args=[review.pk]))

    body = response.content.decode()
    assert response.status_code == 200
    assert "7-day p95 TTFT 950 ms" in body
    assert "ttft p95 7d ms" in body  # the numbers, one row each
    assert 'href="/services/kb-assistant/#run-trend"' in body
    assert "Save answers" in body and "Conclude…" in body
    assert "Rollback readiness now" in body


def test_auditors_read_the_review_but_get_no_form(client, auditor, review):
    client.force_login(auditor)

    body = client.get(reverse("releases:review_detail", args=[review.pk])).content.decode()

    assert "Save answers" not in body and "Conclude…" not in body
    assert "Only the assignee, platform and security &amp; compliance answer" in body


def test_an_unknown_review_is_404(client, auditor):
    client.force_login(auditor)

    assert client.get(reverse("releases:review_detail", args=[999])).status_code == 404


def test_the_checklist_form_saves_answers_and_keeps_them_after_an_error(client, sre, review):
    client.force_login(sre)
    url = reverse("releases:review_checklist", args=[review.pk])

    refused = client.post(url, {"license-answer": "ok", "evidence-answer": "action_needed"})
    assert refused.status_code == 400
    body = refused.content.decode()
    assert "Say why the answer is action needed" in body
    assert 'value="action_needed" checked' in body.replace("\n", " ") or "checked" in body
    assert not Event.objects.filter(action="review.checklist_answered").exists()

    saved = client.post(
        url,
        {
            "license-answer": "ok",
            "evidence-answer": "action_needed",
            "evidence-note": "short evidence is older than the release",
        },
    )
    assert saved.status_code == 302
    review.refresh_from_db()
    assert review.state == "in_progress"
    assert review.items.get(key="evidence").note == "short evidence is older than the release"


def test_the_checklist_refuses_who_may_not_and_a_get(client, auditor, owner, review):
    url = reverse("releases:review_checklist", args=[review.pk])
    for user in (auditor, owner):
        client.force_login(user)
        assert client.post(url, {"license-answer": "ok"}).status_code == 403
    assert client.get(url).status_code == 405


def test_start_refuses_who_may_not_and_a_get(client, auditor, review):
    url = reverse("releases:review_start", args=[review.pk])
    client.force_login(auditor)

    assert client.post(url).status_code == 403
    assert client.get(url).status_code == 405
    review.refresh_from_db()
    assert review.started_at is None


def test_start_takes_up_a_review(client, sre, review):
    client.force_login(sre)

    response = client.post(reverse("releases:review_start", args=[review.pk]))

    assert response.status_code == 302
    review.refresh_from_db()
    assert (review.state, review.started_by) == ("in_progress", sre)


# ---------------------------------------------------------------- concluding


def test_concluding_asks_for_a_confirmation_first(client, sre, review):
    answer_all(review, sre)
    client.force_login(sre)
    url = reverse("releases:review_conclude", args=[review.pk])
    due = (timezone.now().date() + dt.timedelta(days=7)).isoformat()
    fields = {
        "outcome": "pass_with_actions",
        "conclusion": "The new tenant explains the drift.",
        "next_due_on": (timezone.now().date() + dt.timedelta(days=60)).isoformat(),
        "action_1_description": "Add a guard on p95 TTFT",
        "action_1_owner": "olivia",
        "action_1_due_on": due,
    }

    assert client.get(url).status_code == 200
    confirm = client.post(url, fields)
    assert confirm.status_code == 200
    body = confirm.content.decode()
    assert "Conclude now?" in body and "nothing of it can be changed afterwards" in body
    assert "Add a guard on p95 TTFT — olivia" in body
    assert Review.objects.get(pk=review.pk).state == "in_progress"  # not concluded yet

    done = client.post(url, {**fields, "confirm": "yes"})

    assert done.status_code == 302
    review.refresh_from_db()
    assert (review.state, review.outcome) == ("concluded", "pass_with_actions")
    assert ReviewAction.objects.get().description == "Add a guard on p95 TTFT"
    assert Event.objects.filter(action="review.concluded").count() == 1
    page = client.get(reverse("releases:review_detail", args=[review.pk])).content.decode()
    assert "Save answers" not in page and "read-only" in page
    assert client.get(url).status_code == 409


def test_a_refused_conclusion_names_the_field(client, sre, review):
    client.force_login(sre)
    url = reverse("releases:review_conclude", args=[review.pk])
    later = (timezone.now().date() + dt.timedelta(days=30)).isoformat()

    response = client.post(url, {"outcome": "pass", "next_due_on": later, "confirm": "yes"})

    assert response.status_code == 400
    assert "Answer every checklist item before concluding" in response.content.decode()
    assert Review.objects.get(pk=review.pk).state == "open"


def test_only_who_may_conduct_sees_the_conclusion_form(client, auditor, owner, review):
    url = reverse("releases:review_conclude", args=[review.pk])
    for user in (auditor, owner):
        client.force_login(user)
        assert client.get(url).status_code == 403
        assert client.post(url, {"outcome": "pass"}).status_code == 403


def test_reassigning_is_platform_or_security(client, sre, security, owner, review):
    url = reverse("releases:review_reassign", args=[review.pk])
    client.force_login(owner)
    assert client.get(url).status_code == 403

    client.force_login(sre)
    refused = client.post(url, {"assignee": "nobody"})
    assert refused.status_code == 400 and "No user" in refused.content.decode()
    assert client.post(url, {"assignee": "sofia"}).status_code == 302
    review.refresh_from_db()
    assert review.assignee == security


# ---------------------------------------------------------------- service page, catalog, home


def test_the_service_page_shows_the_open_review_and_open_actions(client, sre, owner, review):
    answer_all(review, sre)
    verbs.conclude_review(
        review,
        actor=sre,
        outcome="pass_with_actions",
        actions=[
            {
                "description": "Import a SQL sample set",
                "owner": "olivia",
                "due_on": timezone.now().date(),
            }
        ],
    )
    client.force_login(owner)
    page = client.get(reverse("releases:service_detail", args=["kb-assistant"]))
    body = page.content.decode()
    assert "Import a SQL sample set" in body and "Mark done" in body
    assert f'Last concluded: <a href="/reviews/{review.pk}/">review #{review.pk}</a>' in body

    action = ReviewAction.objects.get()
    url = reverse("releases:review_action_done", args=[action.pk])
    assert client.get(url).status_code == 405
    assert client.post(url, {"note": "kb-sql@1"}).status_code == 302
    body = client.get(reverse("releases:service_detail", args=["kb-assistant"])).content.decode()
    assert "Import a SQL sample set" not in body


def test_only_who_may_marks_an_action_done(client, sre, outsider, auditor, review):
    answer_all(review, sre)
    verbs.conclude_review(
        review,
        actor=sre,
        outcome="pass_with_actions",
        actions=[{"description": "x", "owner": "sam", "due_on": timezone.now().date()}],
    )
    client.force_login(outsider)

    response = client.post(
        reverse("releases:review_action_done", args=[ReviewAction.objects.get().pk])
    )

    assert response.status_code == 403
    assert ReviewAction.objects.get().done_at is None
    client.force_login(auditor)
    page = client.get(reverse("releases:service_detail", args=["kb-assistant"])).content.decode()
    assert "its owner marks it done" in page and "Mark done" not in page


def test_the_catalog_shows_and_filters_overdue_reviews(client, auditor, review, team):
    with time_machine.travel(timezone.now() + dt.timedelta(days=15), tick=False):
        client.force_login(auditor)
        _drifting(team, 1)  # raised now: due in 30 days (internal)
        everything = client.get(reverse("releases:service_list"))
        overdue = client.get(reverse("releases:service_list"), {"review": "overdue"})
        open_ = client.get(reverse("releases:service_list"), {"review": "open"})
        without = client.get(reverse("releases:service_list"), {"review": "none"})

    assert [s.slug for s in overdue.context["page"]] == ["kb-assistant"]
    assert [s.slug for s in open_.context["page"]] == ["drift-0", "kb-assistant"]
    assert "kb-assistant" not in [s.slug for s in without.context["page"]]
    assert f'href="/reviews/{review.pk}/"><span class="badge bad">overdue</span>' in (
        everything.content.decode()
    )


def test_home_lists_my_open_reviews(client, sre, review):
    client.force_login(sre)

    body = client.get(reverse("home")).content.decode()

    assert f"review #{review.pk} is yours and due {review.due_on:%Y-%m-%d}" in body
    with time_machine.travel(timezone.now() + dt.timedelta(days=15), tick=False):
        client.force_login(sre)
        body = client.get(reverse("home")).content.decode()
    assert f"overdue: review #{review.pk} is yours" in body
