"""Reviews as records: the auditor's page and the exports list them (one registry entry),
a webhook receiver is told when one is raised and when it is overdue, and
`manage.py raise_reviews` runs the sweep once and says what it raised."""

from __future__ import annotations

import csv
import datetime as dt
import io

import pytest
import time_machine
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone
from standardwebhooks import Webhook

from ledger.models import Event
from releases.audit.records import RECORD_TYPES, AuditFilters
from releases.audit.services import webhooks
from releases.models import Review
from tests.releases.review_helpers import push_days, sweep
from tests.support.webhook_receiver import receiving

pytestmark = pytest.mark.django_db


@pytest.fixture
def drifting(world, sre):
    push_days(world.service, [950] * 7)
    return world.service


def test_the_audit_page_has_a_reviews_tab_following_the_filters(client, auditor, drifting):
    sweep()
    review = Review.objects.get()
    client.force_login(auditor)

    page = client.get(reverse("releases:audit"), {"type": "reviews", "service": "kb-assistant"})
    other = client.get(reverse("releases:audit"), {"type": "reviews", "service": "elsewhere"})
    by_release = client.get(reverse("releases:audit"), {"change_kind": "model_upgrade"})

    counts = {record.key: count for record, count in page.context["counts"]}
    assert counts["reviews"] == 1
    assert f'href="/reviews/{review.pk}/"' in page.content.decode()
    assert {r.key: n for r, n in other.context["counts"]}["reviews"] == 0
    # A review belongs to no release: a release filter matches none.
    assert {r.key: n for r, n in by_release.context["counts"]}["reviews"] == 0


def test_an_export_writes_the_reviews_with_their_triggers(drifting, tmp_path):
    sweep()
    review = Review.objects.get()
    record = RECORD_TYPES["reviews"]

    rows = list(record.rows(record.queryset(AuditFilters())))

    assert len(rows) == 1
    row = dict(zip(record.columns, rows[0], strict=True))
    assert (row["id"], row["service"], row["state"], row["triggers"]) == (
        review.pk,
        "kb-assistant",
        "open",
        "latency_drift",
    )
    since = (timezone.now() - dt.timedelta(days=1)).date().isoformat()
    until = (timezone.now() + dt.timedelta(days=1)).date().isoformat()
    call_command(
        "export_audit", since=since, until=until, format="csv", output=str(tmp_path / "csv")
    )
    written = list(csv.DictReader(io.StringIO((tmp_path / "csv" / "reviews.csv").read_text())))
    assert [(r["id"], r["triggers"], r["assignee"]) for r in written] == [
        (str(review.pk), "latency_drift", "sam")
    ]


def test_webhooks_are_told_when_a_review_is_raised_and_when_it_is_overdue(sre, drifting):
    with receiving() as receiver:
        subscription = webhooks.create_subscription(
            actor=sre,
            name="Review bot",
            url=receiver.url,
            event_types=["review.raised", "review.overdue"],
        )
        sweep()
        with time_machine.travel(timezone.now() + dt.timedelta(days=15), tick=False):
            sweep()
        for delivery_id in webhooks.dispatch():
            webhooks.deliver(delivery_id)

    bodies = sorted(
        (Webhook(subscription.secret).verify(r.body, r.headers) for r in receiver.received),
        key=lambda body: body["data"]["sequence"],
    )
    assert [body["type"] for body in bodies] == ["review.raised", "review.overdue"]
    review = Review.objects.get()
    assert bodies[0]["data"]["subject"]["id"] == str(review.pk)
    assert bodies[1]["data"]["service"] == "kb-assistant"


def test_the_command_prints_what_it_raised_and_a_dry_run_writes_nothing(drifting, capsys):
    events = Event.objects.count()

    call_command("raise_reviews", "--dry-run")
    dry = capsys.readouterr().out
    assert "kb-assistant: a review would be raised" in dry
    assert "latency_drift: 7-day p95 TTFT 950 ms" in dry
    assert "1 review would be raised" in dry
    assert not Review.objects.exists() and Event.objects.count() == events

    call_command("raise_reviews")
    out = capsys.readouterr().out
    review = Review.objects.get()
    assert f"kb-assistant: review #{review.pk} raised" in out
    assert "1 services judged in 1 batches: 1 review raised" in out

    call_command("raise_reviews")
    assert "0 reviews raised, 0 added to" in capsys.readouterr().out
