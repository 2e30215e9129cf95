"""Signed outbound webhooks against a real HTTP receiver on loopback: each delivery
verified with the standardwebhooks library's own `Webhook.verify`, the dispatcher's
cursor, pausing after a day of failures (time-machine), "send again", the outbound
allow-list, and the pages and API platform uses.

Retries with back-off in a real Celery worker are tests/releases/test_webhook_worker.py.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest
import time_machine
from django.core.exceptions import PermissionDenied, ValidationError
from django.urls import reverse
from django.utils import timezone
from standardwebhooks import Webhook

from ledger.models import Event
from releases.audit.services import webhooks
from releases.governance import services
from releases.models import Delivery, WebhookSubscription
from tests.support.webhook_receiver import receiving

pytestmark = pytest.mark.django_db


def subscribe(sre, url: str, types=("release.submitted",)) -> WebhookSubscription:
    return webhooks.create_subscription(
        actor=sre, name="Change board bot", url=url, event_types=list(types)
    )


def verified(subscription: WebhookSubscription, received) -> dict:
    """The body as the standardwebhooks library's verifier accepts it."""
    return Webhook(subscription.secret).verify(received.body, received.headers)


def test_a_subscription_is_told_of_a_submitted_release_signed_per_standard_webhooks(
    sre, release, owner
):
    with receiving() as receiver:
        subscription = subscribe(sre, receiver.url)
        services.submit_release(release, actor=owner)
        [delivery_id] = webhooks.dispatch()
        outcome = webhooks.deliver(delivery_id)

    assert outcome.state == "succeeded"
    [request] = receiver.received
    body = verified(subscription, request)
    event = Event.objects.get(action="release.submitted")
    assert body["type"] == "release.submitted"
    assert body["data"]["sequence"] == event.sequence
    assert body["data"]["hash"] == event.hash
    assert body["data"]["service"] == "kb-assistant"
    assert body["data"]["subject"] == {
        "type": "releases.release",
        "id": str(release.pk),
        "label": str(release),
    }
    assert request.headers["webhook-id"] == f"msg_{subscription.pk}_{event.sequence}"
    delivery = Delivery.objects.get()
    assert (delivery.attempts, delivery.response_code) == (1, 200)
    assert delivery.latency_ms is not None and delivery.delivered_at is not None


def test_a_tampered_body_does_not_verify(sre, release, owner):
    from standardwebhooks import WebhookVerificationError

    with receiving() as receiver:
        subscription = subscribe(sre, receiver.url)
        services.submit_release(release, actor=owner)
        webhooks.deliver(webhooks.dispatch()[0])

    request = receiver.received[0]
    with pytest.raises(WebhookVerificationError):
        Webhook(subscription.secret).verify(request.body.replace(b"kb-", b"xx-"), request.headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(webhooks.new_secret()).verify(request.body, request.headers)


def test_the_dispatcher_reads_each_event_once_and_only_the_subscribed_types(sre, release, owner):
    subscription = subscribe(sre, "http://127.0.0.1:9/hooks", types=["release.approved"])
    services.submit_release(release, actor=owner)  # submitted: not subscribed

    assert webhooks.dispatch() == []
    subscription.refresh_from_db()
    assert subscription.cursor == Event.objects.order_by("-sequence").first().sequence
    assert webhooks.dispatch() == []
    assert not Delivery.objects.exists()


def test_what_happened_before_the_subscription_is_not_sent(sre, release, owner):
    services.submit_release(release, actor=owner)
    subscribe(sre, "http://127.0.0.1:9/hooks")

    assert webhooks.dispatch() == []


def test_a_paused_subscription_gets_what_it_missed_when_resumed(sre, release, owner):
    subscription = subscribe(sre, "http://127.0.0.1:9/hooks")
    webhooks.pause_subscription(subscription, actor=sre)
    services.submit_release(release, actor=owner)

    assert webhooks.dispatch() == []
    webhooks.resume_subscription(subscription, actor=sre)
    assert len(webhooks.dispatch()) == 1


def test_a_subscription_failing_for_a_day_is_paused_and_flagged(sre, release, owner, settings):
    settings.WEBHOOK_MAX_ATTEMPTS = 3
    start = (timezone.now() + dt.timedelta(hours=1)).replace(second=0, microsecond=0)
    with receiving(then=503) as receiver, time_machine.travel(start, tick=False) as clock:
        subscription = subscribe(sre, receiver.url)
        services.submit_release(release, actor=owner)
        [first] = webhooks.dispatch()

        failed = webhooks.deliver(first)
        assert (failed.state, failed.retry_in) == ("retrying", 30.0)
        subscription.refresh_from_db()
        assert subscription.failing_since == start and subscription.is_active

        clock.move_to(start + dt.timedelta(minutes=1))
        again = webhooks.deliver(first)
        assert (again.state, again.retry_in) == ("retrying", 60.0)  # doubled
        clock.move_to(start + dt.timedelta(minutes=3))
        assert webhooks.deliver(first).state == "failed"  # its attempts are used up

        # Still failing a day later: a new event's delivery fails, and the ledger pauses.
        clock.move_to(start + dt.timedelta(hours=24, minutes=5))
        services.withdraw_release(release, actor=owner)
        services.reopen_release(release, actor=owner)
        reopened = release.reopened_as.get()
        services.submit_release(reopened, actor=owner)
        [second] = webhooks.dispatch()
        outcome = webhooks.deliver(second)

    assert outcome.state == "failed" and outcome.retry_in is None
    subscription.refresh_from_db()
    assert subscription.state == "paused"
    assert subscription.failing_since == start
    assert f"failing since {start:%Y-%m-%d %H:%M}" in subscription.paused_reason
    pause = Event.objects.get(action="webhook.subscription_paused")
    assert pause.actor_label == "system"
    assert "secret" not in pause.payload and subscription.secret not in pause.payload
    assert len(receiver.received) == 4
    # Paused: nothing more is tried until platform resumes it.
    assert webhooks.deliver(second) == webhooks.Outcome("skipped")


def test_a_success_clears_the_failure_flag(sre, release, owner):
    with receiving(script=[500]) as receiver:
        subscription = subscribe(sre, receiver.url)
        services.submit_release(release, actor=owner)
        [delivery_id] = webhooks.dispatch()
        webhooks.deliver(delivery_id)
        subscription.refresh_from_db()
        assert subscription.failing_since is not None
        assert webhooks.deliver(delivery_id).state == "succeeded"

    subscription.refresh_from_db()
    assert subscription.failing_since is None


def test_send_again_delivers_with_the_same_webhook_id_even_while_paused(
    sre, release, owner, django_capture_on_commit_callbacks
):
    with receiving() as receiver:
        subscription = subscribe(sre, receiver.url)
        services.submit_release(release, actor=owner)
        [delivery_id] = webhooks.dispatch()
        webhooks.deliver(delivery_id)
        webhooks.pause_subscription(subscription, actor=sre)

        with django_capture_on_commit_callbacks() as queued:
            webhooks.resend_delivery(Delivery.objects.get(), actor=sre)
        # Its Event (counted by the metrics on commit), then deliver_webhook(delivery,
        # manual=True).
        assert [getattr(getattr(c, "func", c), "__name__", "") for c in queued] == [
            "inc",
            "send_task",
        ]
        assert queued[-1].args == ("deliver_webhook",)
        assert queued[-1].keywords == {"args": (delivery_id,), "kwargs": {"manual": True}}
        assert webhooks.deliver(delivery_id, manual=True).state == "succeeded"

    first, second = receiver.received
    assert first.headers["webhook-id"] == second.headers["webhook-id"]
    assert verified(subscription, second)["data"] == verified(subscription, first)["data"]
    assert Delivery.objects.get().attempts == 2
    assert Event.objects.filter(action="webhook.delivery_resent", actor=sre).exists()


def test_only_hosts_on_the_webhook_allow_list_are_reached(sre, release, owner, settings):
    for url, said in [
        ("http://169.254.169.254/latest/meta-data/", "always refused"),
        ("http://10.99.0.1/hooks", "is not in WEBHOOK_ALLOWED_HOSTS"),
        ("http://127.0.0.1:5432/hooks", "127.0.0.1 port 5432 (PostgreSQL)"),
        ("http://127.0.0.1:6379/hooks", "127.0.0.1 port 6379 (Redis)"),
        ("ftp://127.0.0.1/hooks", "http:// or https://"),
    ]:
        with pytest.raises(ValidationError) as refused:
            subscribe(sre, url)
        assert said in refused.value.message_dict["url"][0]
    with receiving() as receiver:
        subscribe(sre, receiver.url)
        services.submit_release(release, actor=owner)
        [delivery_id] = webhooks.dispatch()
        # The list changed after the subscription was made: checked again at connect time.
        settings.WEBHOOK_ALLOWED_HOSTS = ["10.0.0.0/24"]
        outcome = webhooks.deliver(delivery_id)

    assert outcome.state == "retrying"
    assert receiver.received == []
    assert "not in WEBHOOK_ALLOWED_HOSTS" in Delivery.objects.get().error


def test_webhooks_do_not_reach_what_only_replay_may(sre, release, owner, settings):
    # The inference network is replay's; webhook receivers are listed apart.
    settings.REPLAY_ALLOWED_HOSTS = ["10.0.0.0/24", "127.0.0.0/8"]
    settings.WEBHOOK_ALLOWED_HOSTS = ["127.0.0.0/8"]

    with pytest.raises(ValidationError) as refused:
        subscribe(sre, "http://10.0.0.7:8000/v1/chat/completions")
    assert "10.0.0.7 is not in WEBHOOK_ALLOWED_HOSTS" in refused.value.message_dict["url"][0]
    assert "WEBHOOK_ALLOWED_HOSTS lists 127.0.0.0/8" in refused.value.message_dict["url"][0]

    with receiving() as receiver:
        subscribe(sre, receiver.url)
        services.submit_release(release, actor=owner)
        settings.REPLAY_ALLOWED_HOSTS = []  # replay's list no longer matters to webhooks
        outcome = webhooks.deliver(webhooks.dispatch()[0])
    assert outcome.state == "succeeded"
    assert len(receiver.received) == 1


def test_a_receiver_on_a_data_store_port_is_reached_only_when_an_entry_names_it(
    sre, release, owner, settings
):
    settings.WEBHOOK_ALLOWED_HOSTS = ["127.0.0.0/8", "127.0.0.1:6379"]

    assert subscribe(sre, "http://127.0.0.1:6379/hooks").url == "http://127.0.0.1:6379/hooks"
    with pytest.raises(ValidationError) as refused:
        subscribe(sre, "http://127.0.0.2:6379/hooks")
    assert "127.0.0.2 port 6379 (Redis)" in refused.value.message_dict["url"][0]


def test_without_its_own_list_webhooks_use_replays_and_say_so(sre, settings):
    # A deployment from before WEBHOOK_ALLOWED_HOSTS: its webhooks keep working.
    settings.WEBHOOK_ALLOWED_HOSTS = None
    settings.REPLAY_ALLOWED_HOSTS = ["127.0.0.0/8"]

    assert subscribe(sre, "http://127.0.0.1:9/hooks")
    with pytest.raises(ValidationError) as refused:
        subscribe(sre, "http://10.99.0.1/hooks")
    assert (
        "10.99.0.1 is not in REPLAY_ALLOWED_HOSTS (used for webhooks while "
        "WEBHOOK_ALLOWED_HOSTS is unset)"
    ) in refused.value.message_dict["url"][0]


def test_the_secret_never_reaches_an_event(sre):
    subscription = subscribe(sre, "http://127.0.0.1:9/hooks")
    webhooks.pause_subscription(subscription, actor=sre)
    webhooks.delete_subscription(subscription, actor=sre)

    payloads = list(
        Event.objects.filter(action__startswith="webhook.").values_list("payload", flat=True)
    )
    assert len(payloads) == 3
    assert all(subscription.secret not in p for p in payloads)


def test_only_platform_manages_subscriptions(owner, auditor, security):
    for person in (owner, auditor, security):
        with pytest.raises(PermissionDenied):
            subscribe(person, "http://127.0.0.1:9/hooks")


# ---------------------------------------------------------------- pages


def test_the_page_shows_the_secret_once(client, sre):
    client.force_login(sre)

    created = client.post(
        reverse("releases:webhook_new"),
        {
            "name": "Change board bot",
            "url": "http://127.0.0.1:9/hooks",
            "event_types": ["release.approved", "export.ready"],
        },
    )

    subscription = WebhookSubscription.objects.get()
    assert created.status_code == 302
    assert created["Location"] == reverse("releases:webhook_detail", args=[subscription.pk])
    first = client.get(created["Location"]).content.decode()
    second = client.get(created["Location"]).content.decode()
    assert subscription.secret in first and "shown once" in first
    assert subscription.secret not in second
    assert subscription.event_types == ["release.approved", "export.ready"]


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("http://169.254.169.254/", "always refused"),
        ("http://127.0.0.1:5432/", "127.0.0.1 port 5432 (PostgreSQL)"),
    ],
)
def test_a_refused_url_is_said_beside_the_field_and_nothing_is_saved(client, sre, url, said):
    client.force_login(sre)

    response = client.post(
        reverse("releases:webhook_new"),
        {"name": "x", "url": url, "event_types": ["release.approved"]},
    )

    assert response.status_code == 400
    assert said in response.content.decode()
    assert not WebhookSubscription.objects.exists()


def test_the_api_refuses_a_data_store_port_naming_the_field(client, sre):
    client.force_login(sre)

    response = client.post(
        "/api/webhooks/",
        {"name": "x", "url": "http://127.0.0.1:11211/", "event_types": ["release.approved"]},
        content_type="application/json",
    )

    assert response.status_code == 400
    assert "127.0.0.1 port 11211 (memcached)" in response.json()["url"][0]
    assert not WebhookSubscription.objects.exists()


def test_pause_resume_and_delete_after_confirmation(client, sre):
    subscription = subscribe(sre, "http://127.0.0.1:9/hooks")
    client.force_login(sre)

    client.post(reverse("releases:webhook_pause", args=[subscription.pk]))
    subscription.refresh_from_db()
    assert subscription.state == "paused"
    client.post(reverse("releases:webhook_resume", args=[subscription.pk]))
    subscription.refresh_from_db()
    assert subscription.state == "active"
    confirm = client.get(reverse("releases:webhook_delete", args=[subscription.pk]))
    assert "its delivery log (0 deliveries) is deleted with it" in confirm.content.decode()
    assert WebhookSubscription.objects.exists()
    deleted = client.post(reverse("releases:webhook_delete", args=[subscription.pk]))
    assert deleted["Location"] == reverse("releases:webhook_list")
    assert not WebhookSubscription.objects.exists()
    assert client.get(reverse("releases:webhook_pause", args=[subscription.pk])).status_code == 405


def test_the_delivery_log_reads_in_a_constant_number_of_queries(
    client, sre, release, owner, django_assert_num_queries
):
    subscription = subscribe(sre, "http://127.0.0.1:9/hooks", types=list(webhooks.EVENT_TYPES))
    services.submit_release(release, actor=owner)
    services.withdraw_release(release, actor=owner)
    webhooks.dispatch()
    client.force_login(sre)
    url = reverse("releases:webhook_detail", args=[subscription.pk])
    client.get(url)

    # session, user, groups (the rule), the subscription, the log's count, its rows
    # with their events
    with django_assert_num_queries(6):
        response = client.get(url)
    assert response.status_code == 200


def test_others_are_refused_the_pages(client, auditor):
    client.force_login(auditor)
    assert client.get(reverse("releases:webhook_list")).status_code == 403
    assert client.get(reverse("releases:webhook_new")).status_code == 403


# ---------------------------------------------------------------- API


def test_the_api_shows_the_secret_in_the_creation_answer_only(client, sre, release, owner):
    client.force_login(sre)

    created = client.post(
        "/api/webhooks/",
        {
            "name": "Ticket bot",
            "url": "http://127.0.0.1:9/hooks",
            "event_types": ["release.submitted"],
        },
        content_type="application/json",
    )

    assert created.status_code == 201
    secret = created.json()["secret"]
    assert secret.startswith("whsec_")
    pk = created.json()["id"]
    assert "secret" not in client.get(f"/api/webhooks/{pk}/").json()
    assert secret not in json.dumps(client.get("/api/webhooks/").json())
    services.submit_release(release, actor=owner)
    webhooks.dispatch()
    log = client.get(f"/api/webhooks/{pk}/deliveries/").json()
    assert [d["event_type"] for d in log["results"]] == ["release.submitted"]
    paused = client.post(f"/api/webhooks/{pk}/pause/")
    assert paused.json()["state"] == "paused"
    resent = client.post(
        f"/api/webhooks/{pk}/resend/",
        {"delivery": log["results"][0]["id"]},
        content_type="application/json",
    )
    assert resent.status_code == 202
    assert client.delete(f"/api/webhooks/{pk}/").status_code == 204


def test_the_api_names_an_unknown_event_type(client, sre):
    client.force_login(sre)

    response = client.post(
        "/api/webhooks/",
        {"name": "x", "url": "http://127.0.0.1:9/h", "event_types": ["release.exploded"]},
        content_type="application/json",
    )

    assert response.status_code == 400
    assert response.json() == {"event_types": {"0": ['"release.exploded" is not a valid choice.']}}
    assert not WebhookSubscription.objects.exists()


def test_the_api_delivery_log_reads_in_a_constant_number_of_queries(
    client, sre, release, owner, django_assert_num_queries
):
    subscription = subscribe(sre, "http://127.0.0.1:9/hooks", types=list(webhooks.EVENT_TYPES))
    services.submit_release(release, actor=owner)
    services.withdraw_release(release, actor=owner)
    webhooks.dispatch()
    client.force_login(sre)
    url = f"/api/webhooks/{subscription.pk}/deliveries/"
    client.get(url)

    # session, user, groups (the rule), the subscription, the log's count, its rows
    # with their events
    with django_assert_num_queries(6):
        response = client.get(url)
    assert response.json()["count"] == 1  # submitted (withdrawn is no webhook type)
