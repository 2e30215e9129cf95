"""What the review pages link to and list: each kind of trigger links to the runs, reports,
assets, revisions and runtimes its numbers name; its numbers read as words; an action past
its due date is on its owner's home; and nobody signed in has reviews of their own."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.contrib.auth.models import AnonymousUser
from django.urls import reverse
from django.utils import timezone

from ledger.models import Service
from releases.models import Review, ReviewTrigger
from releases.reviews.queries import reviews as review_queries
from releases.reviews.services import periodic_reviews as verbs
from tests.releases.review_helpers import answer_all, push_days, sweep

pytestmark = pytest.mark.django_db


@pytest.fixture
def review(world, sre):
    push_days(world.service, [950] * 7)
    sweep()
    return Review.objects.get(service=world.service)


def _trigger(review: Review, kind: str, numbers: object, key: str = "k") -> ReviewTrigger:
    """A finding as the sweep records it (the sweep's own finders are tested elsewhere)."""
    return ReviewTrigger.objects.create(
        review=review,
        kind=kind,
        key=f"{kind}:{key}",
        summary=f"A {kind} finding.",
        numbers=numbers,
        detected_at=timezone.now(),
    )


def _page(client, user, review: Review) -> str:
    client.force_login(user)
    response = client.get(reverse("releases:review_detail", args=[review.pk]))
    assert response.status_code == 200
    return response.content.decode()


def test_each_kind_of_trigger_links_to_what_its_numbers_name(client, world, review, auditor):
    slug = world.service.slug
    report = world.reports["short"]
    live = world.live
    _trigger(
        review,
        "latency_drift",
        {
            "baseline_report": report.pk,
            "baseline_workload": "short",
            "revision_number": live.number,
        },
        key="with-baseline",
    )
    _trigger(review, "license", {"asset": live.model_asset.pk, "asset_label": "Qwen 7B@main"})
    _trigger(
        review,
        "rollback_verification",
        {"target": live.label, "target_number": live.number, "run": world.verification.pk},
    )
    _trigger(
        review,
        "evidence_expired",
        {"revision_number": live.number, "reports": [{"report": report.pk, "workload": "short"}]},
    )
    _trigger(review, "replay_regression", {"runs": [{"run": world.candidate_run.pk}]})
    _trigger(review, "engine_outdated", {"runtime": live.runtime.name})

    links = {
        (t.kind, link.label): link.url
        for t in review.triggers.all()
        for link in review_queries.trigger_links(t, world.service)
    }
    loadtest = reverse("ledger:loadtest_detail", args=[slug, live.number, report.pk])
    assert links[("latency_drift", "the short load test at release")] == loadtest
    assert links[("license", "Qwen 7B@main")] == reverse(
        "ledger:asset_detail", args=[live.model_asset.pk]
    )
    assert links[("rollback_verification", f"run #{world.verification.pk}")] == reverse(
        "replay:run_detail", args=[world.verification.pk]
    )
    assert links[("rollback_verification", f"target {live.label}")] == reverse(
        "ledger:revision_detail", args=[slug, live.number]
    )
    assert links[("evidence_expired", "short load test")] == loadtest
    assert links[("replay_regression", f"run #{world.candidate_run.pk}")] == reverse(
        "replay:run_detail", args=[world.candidate_run.pk]
    )
    assert links[("engine_outdated", live.runtime.name)] == reverse(
        "ledger:runtime_detail", args=[live.runtime.name]
    )

    html = _page(client, auditor, review)
    for url in links.values():
        assert f'href="{url}"' in html
    assert "Qwen 7B@main</a>" in html
    assert f"target {live.label}</a>" in html


def test_a_cadence_trigger_links_to_the_last_review(client, world, review, sre, auditor):
    answer_all(review, sre)
    verbs.conclude_review(review, actor=sre, outcome="pass", conclusion="Explained by a tenant.")
    # The next review of the service, raised by the cadence, names the last one.
    nxt = Review.objects.create(
        service=world.service,
        due_on=timezone.now().date() + dt.timedelta(days=14),
        raised_at=timezone.now(),
    )
    _trigger(nxt, "cadence", {"last_review": review.pk, "cadence_days": 90})
    html = _page(client, auditor, nxt)
    assert f'href="{reverse("releases:review_detail", args=[review.pk])}"' in html
    assert f"review #{review.pk}</a>" in html


def test_a_trigger_naming_nothing_to_open_has_no_links(client, world, review, auditor):
    asset = _trigger(review, "asset_deprecated", {"lifecycle": "deprecated"})
    expired = _trigger(review, "evidence_expired", {"reports": []})
    # Numbers that are not a mapping (a row written before they were): no links, no rows.
    odd = _trigger(review, "latency_drift", ["not", "a", "dict"], key="no-baseline")
    assert review_queries.trigger_links(asset, world.service) == []
    assert review_queries.trigger_links(expired, world.service) == []
    # A drift always links to the service's daily trend, even without a baseline report.
    (trend,) = review_queries.trigger_links(odd, world.service)
    assert trend.url == reverse("releases:service_detail", args=[world.service.slug]) + "#run-trend"
    html = _page(client, auditor, review)
    assert "A latency_drift finding." in html
    assert "<dt>0</dt>" not in html and ">not<" not in html


def test_a_triggers_numbers_read_as_words_on_the_review_page(client, review, auditor):
    _trigger(
        review,
        "replay_regression",
        {
            "revision": "kb-assistant r1",
            "baseline": None,
            "stale": True,
            "fresh": False,
            "requests": 12345.678,
            "ratio": 0.123456,
            "runs": [],
            "limits": {"max_age_days": 30},
            "revision_number": 1,
        },
    )
    html = _page(client, auditor, review)
    assert "<dt>baseline</dt><dd>—</dd>" in html
    assert "<dt>stale</dt><dd>yes</dd>" in html
    assert "<dt>fresh</dt><dd>no</dd>" in html
    assert "<dt>requests</dt><dd>12,345.7</dd>" in html
    assert "<dt>ratio</dt><dd>0.1235</dd>" in html
    assert "<dt>runs</dt><dd>none</dd>" in html
    assert "<dt>limits</dt><dd>max age days 30</dd>" in html
    # An id the page links already is not a row of its own.
    assert "<dt>revision number</dt>" not in html


def test_an_action_past_its_due_date_is_on_its_owners_home(client, review, sre, owner):
    answer_all(review, sre)
    due = timezone.now().astimezone(dt.UTC).date() + dt.timedelta(days=7)
    verbs.conclude_review(
        review,
        actor=sre,
        outcome="pass_with_actions",
        conclusion="The new tenant explains the drift.",
        actions=[{"description": "Add a guard on p95 TTFT", "owner": "olivia", "due_on": due}],
    )
    client.force_login(owner)
    assert "your action from review" not in client.get(reverse("home")).content.decode()
    with time_machine.travel(timezone.now() + dt.timedelta(days=8), tick=False):
        client.force_login(owner)
        body = client.get(reverse("home")).content.decode()
        items = review_queries.attention_items(owner)
    said = (
        f"overdue: your action from review #{review.pk} was due {due:%Y-%m-%d}: "
        "Add a guard on p95 TTFT"
    )
    assert said in body
    assert (
        "act",
        "kb-assistant",
        said,
        reverse("releases:service_detail", args=["kb-assistant"]) + "#reviews",
    ) in items


def test_nobody_signed_in_has_reviews_or_anything_to_attend_to(review):
    anonymous = AnonymousUser()
    assert list(review_queries.my_reviews(anonymous)) == []
    assert list(review_queries.my_reviews(None)) == []
    assert review_queries.attention_items(anonymous) == []
    assert review_queries.attention_items(None) == []


def test_a_review_filter_it_does_not_know_leaves_the_services_as_they_are(world, review, team):
    from tests.ledger.factories import ServiceFactory

    ServiceFactory(slug="quiet", team=team)
    everything = Service.objects.order_by("slug")
    assert list(review_queries.filter_review_status(everything, "")) == list(everything)
    assert list(review_queries.filter_review_status(everything, "soon")) == list(everything)
    assert [s.slug for s in review_queries.filter_review_status(everything, "open")] == [
        "kb-assistant"
    ]
    assert [s.slug for s in review_queries.filter_review_status(everything, "none")] == ["quiet"]
