"""Send again, from a subscription's page: platform presses it on a delivery of the log and
reads which one goes out again; a delivery of another subscription is not found under
this one, a GET says the button posts, and nobody else may press it."""

from __future__ import annotations

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from ledger.models import Event
from releases.audit.services import webhooks
from releases.governance import services
from releases.models import Delivery, WebhookSubscription

pytestmark = pytest.mark.django_db


def _subscribe(sre, name: str) -> WebhookSubscription:
    # Port 9 (discard) on loopback: nothing here sends, the deliveries are only queued.
    return webhooks.create_subscription(
        actor=sre, name=name, url="http://127.0.0.1:9/hooks", event_types=["release.submitted"]
    )


@pytest.fixture
def delivery(sre, release, owner) -> Delivery:
    _subscribe(sre, "Change board bot")
    services.submit_release(release, actor=owner)
    [delivery_id] = webhooks.dispatch()
    return Delivery.objects.select_related("event", "subscription").get(pk=delivery_id)


def test_send_again_on_the_page_says_which_delivery_goes_out_again(
    client, sre, delivery, django_capture_on_commit_callbacks
):
    client.force_login(sre)
    url = reverse("releases:webhook_resend", args=[delivery.subscription_id, delivery.pk])
    with django_capture_on_commit_callbacks() as queued:
        response = client.post(url)
    assert response.status_code == 302
    assert response["Location"] == reverse(
        "releases:webhook_detail", args=[delivery.subscription_id]
    )
    said = [str(m) for m in get_messages(response.wsgi_request)]
    assert said == [
        f"Delivery #{delivery.pk} (event #{delivery.event.sequence}) is being sent again."
    ]
    assert Event.objects.filter(action="webhook.delivery_resent", actor=sre).count() == 1
    assert queued[-1].keywords == {"args": (delivery.pk,), "kwargs": {"manual": True}}


def test_a_delivery_of_another_subscription_is_not_found_under_this_one(client, sre, delivery):
    other = _subscribe(sre, "Another bot")
    client.force_login(sre)
    response = client.post(reverse("releases:webhook_resend", args=[other.pk, delivery.pk]))
    assert response.status_code == 404
    missing = client.post(
        reverse("releases:webhook_resend", args=[delivery.subscription_id, 999999])
    )
    assert missing.status_code == 404
    assert not Event.objects.filter(action="webhook.delivery_resent").exists()


def test_send_again_is_a_button_that_posts(client, sre, delivery):
    client.force_login(sre)
    url = reverse("releases:webhook_resend", args=[delivery.subscription_id, delivery.pk])
    response = client.get(url)
    assert response.status_code == 405
    assert "sends this delivery again" in response.content.decode()
    assert not Event.objects.filter(action="webhook.delivery_resent").exists()


def test_only_platform_sends_again(client, auditor, owner, delivery):
    url = reverse("releases:webhook_resend", args=[delivery.subscription_id, delivery.pk])
    for person in (auditor, owner):
        client.force_login(person)
        assert client.post(url).status_code == 403
    assert not Event.objects.filter(action="webhook.delivery_resent").exists()
