"""Signed outbound webhooks: subscriptions, the dispatcher that reads the event chain,
and deliveries signed per Standard Webhooks.

- A subscription's cursor starts at the chain head when it is created: it is told
  what happens from then on, not the past.
- `dispatch` (beat, every WEBHOOK_DISPATCH_EVERY_SECONDS; a singleton) reads, for
  each active subscription, the events after its cursor whose action is one of
  its types (`releases.audit.webhook_types`), makes one `Delivery` per event (unique per
  subscription and event, so reading an event twice delivers it once), moves the
  cursor and queues `deliver_webhook` for each on commit. A paused subscription
  keeps its cursor: what happened while it was paused goes out when it resumes.
- `deliver` posts one delivery with httpx through replay's outbound guard
  (`replay.outbound.guarded_client` with `DestinationPolicy.for_webhooks`:
  WEBHOOK_ALLOWED_HOSTS, hosts and ports, checked at every connection after DNS
  resolution, no redirects, no proxies), signed with the
  subscription's secret by the `standardwebhooks` package (headers `webhook-id`,
  `webhook-timestamp`, `webhook-signature`). A 2xx is a success. Anything else is
  retried with exponential back-off (WEBHOOK_RETRY_BASE_SECONDS doubling, at most
  WEBHOOK_RETRY_MAX_SECONDS, WEBHOOK_MAX_ATTEMPTS in all); a subscription failing
  for WEBHOOK_PAUSE_AFTER_HOURS (since its last success) is paused and flagged.
- Creating, pausing, resuming and deleting a subscription, a pause by the
  ledger itself, and "send again" are Events; the secret never is.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import secrets
import time
from dataclasses import dataclass
from typing import Any

import httpx
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Max
from django.utils import timezone
from standardwebhooks import Webhook

from ledger.chain import append_event
from ledger.models import Event
from lib.actors import Actor
from lib.tasks import send_on_commit
from releases import permissions
from releases.audit.webhook_types import EVENT_TYPES, actions_for
from releases.models import Delivery, WebhookSubscription
from replay.outbound import DestinationPolicy, base_url_problem, guarded_client
from replay.services.common import try_singleton_lock

SECRET_PREFIX = "whsec_"  # noqa: S105 - the spec's prefix, not a secret
USER_AGENT = "inference-release-ledger-webhooks/1"
DISPATCH_BATCH = 500


def new_secret() -> str:
    """A Standard Webhooks secret: `whsec_` and 24 random bytes in base64."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(24)).decode()


def _subject(subscription: WebhookSubscription) -> dict[str, Any]:
    """What an Event says of a subscription: never its secret."""
    return {
        "name": subscription.name,
        "url": subscription.url,
        "event_types": subscription.event_types,
        "state": subscription.state,
    }


def _check(name: str, url: str, event_types: Any) -> list[str]:
    errors: dict[str, str] = {}
    if not name.strip():
        errors["name"] = "Name what receives these events, e.g. Change board bot."
    if not isinstance(event_types, list | tuple) or not event_types:
        errors["event_types"] = f"Choose at least one of: {', '.join(EVENT_TYPES)}."
        types: list[str] = []
    else:
        types = list(dict.fromkeys(str(t) for t in event_types))
        unknown = [t for t in types if t not in EVENT_TYPES]
        if unknown:
            errors["event_types"] = (
                f"Unknown event types: {', '.join(unknown)}; choose from {', '.join(EVENT_TYPES)}."
            )
    if not url.startswith(("http://", "https://")):
        errors["url"] = "Give an http:// or https:// URL."
    elif problem := base_url_problem(url, DestinationPolicy.for_webhooks()):
        errors["url"] = problem
    if errors:
        raise ValidationError(errors)
    return types


@transaction.atomic
def create_subscription(
    *, actor: Actor, name: str, url: str, event_types: list[str]
) -> WebhookSubscription:
    """A new active subscription told of what happens from now on. Its `secret` is
    shown to the person who made it once (the page and the API's create answer)."""
    permissions.ensure_can_manage_webhooks(actor)
    types = _check(name, url, event_types)
    head = Event.objects.aggregate(head=Max("sequence"))["head"] or 0
    subscription = WebhookSubscription(
        name=name.strip(),
        url=url,
        event_types=types,
        secret=new_secret(),
        cursor=head,
        created_by=actor,
    )
    subscription.full_clean(exclude=["secret", "created_by"])
    subscription.save(force_insert=True)
    append_event(
        actor=actor,
        action="webhook.subscription_created",
        subject=subscription,
        payload=_subject(subscription),
    )
    return subscription


def _lock(subscription: WebhookSubscription) -> WebhookSubscription:
    return WebhookSubscription.objects.select_for_update().get(pk=subscription.pk)


@transaction.atomic
def pause_subscription(
    subscription: WebhookSubscription, *, actor: Actor, reason: str = ""
) -> WebhookSubscription:
    permissions.ensure_can_manage_webhooks(actor)
    subscription = _lock(subscription)
    if subscription.state == WebhookSubscription.State.PAUSED:
        return subscription
    who = actor.get_username() if actor is not None else "the ledger"
    subscription.state = WebhookSubscription.State.PAUSED
    subscription.paused_reason = (reason or f"paused by {who}")[:300]
    subscription.save(update_fields=["state", "paused_reason", "updated_at"])
    append_event(
        actor=actor,
        action="webhook.subscription_paused",
        subject=subscription,
        payload={**_subject(subscription), "reason": subscription.paused_reason},
    )
    return subscription


@transaction.atomic
def resume_subscription(subscription: WebhookSubscription, *, actor: Actor) -> WebhookSubscription:
    """Active again, its failure flag cleared; what happened meanwhile goes out next."""
    permissions.ensure_can_manage_webhooks(actor)
    subscription = _lock(subscription)
    if subscription.state == WebhookSubscription.State.ACTIVE:
        return subscription
    subscription.state = WebhookSubscription.State.ACTIVE
    subscription.paused_reason = ""
    subscription.failing_since = None
    subscription.save(update_fields=["state", "paused_reason", "failing_since", "updated_at"])
    append_event(
        actor=actor,
        action="webhook.subscription_resumed",
        subject=subscription,
        payload=_subject(subscription),
    )
    return subscription


@transaction.atomic
def delete_subscription(subscription: WebhookSubscription, *, actor: Actor) -> None:
    """The subscription and its delivery log go; the Events about it stay."""
    permissions.ensure_can_manage_webhooks(actor)
    subscription = _lock(subscription)
    append_event(
        actor=actor,
        action="webhook.subscription_deleted",
        subject=subscription,
        payload={**_subject(subscription), "deliveries": subscription.deliveries.count()},
    )
    subscription.delete()


@transaction.atomic
def resend_delivery(delivery: Delivery, *, actor: Actor) -> Delivery:
    """Send a delivery again now, with the same webhook-id (receivers de-duplicate on it),
    even while its subscription is paused: a way to test a receiver that was fixed."""
    permissions.ensure_can_manage_webhooks(actor)
    delivery = (
        Delivery.objects.select_for_update().select_related("subscription").get(pk=delivery.pk)
    )
    delivery.state = Delivery.State.PENDING
    delivery.next_attempt_at = timezone.now()
    delivery.save(update_fields=["state", "next_attempt_at"])
    append_event(
        actor=actor,
        action="webhook.delivery_resent",
        subject=delivery.subscription,
        payload={"delivery": delivery.pk, "event": delivery.event_id, "type": delivery.event_type},
    )
    send_on_commit("deliver_webhook", delivery.pk, manual=True)
    return delivery


# ---------------------------------------------------------------- dispatch


def dispatch(*, batch: int = DISPATCH_BATCH) -> list[int]:
    """Make the deliveries of the events after each active subscription's cursor and
    queue them; answer their ids. A second dispatcher at the same time returns []."""
    created: list[int] = []
    with transaction.atomic():
        if not try_singleton_lock("dispatch_webhooks"):
            return []
        head = Event.objects.aggregate(head=Max("sequence"))["head"] or 0
        subscriptions = WebhookSubscription.objects.select_for_update().filter(
            state=WebhookSubscription.State.ACTIVE, cursor__lt=head
        )
        for subscription in subscriptions:
            wanted = actions_for(subscription.event_types)
            events = list(
                Event.objects.filter(
                    sequence__gt=subscription.cursor, sequence__lte=head, action__in=list(wanted)
                )
                .order_by("sequence")
                .values_list("pk", "sequence", "action")[:batch]
            )
            # A full batch: the rest next time, from the last one taken.
            cursor = events[-1][1] if len(events) == batch else head
            Delivery.objects.bulk_create(
                [
                    Delivery(
                        subscription=subscription,
                        event_id=pk,
                        event_type=wanted[action],
                        message_id=f"msg_{subscription.pk}_{sequence}",
                        next_attempt_at=timezone.now(),
                    )
                    for pk, sequence, action in events
                ],
                ignore_conflicts=True,
            )
            ids = list(
                Delivery.objects.filter(
                    subscription=subscription,
                    event_id__in=[pk for pk, _, _ in events],
                    attempts=0,
                    state=Delivery.State.PENDING,
                ).values_list("pk", flat=True)
            )
            for delivery_id in ids:
                send_on_commit("deliver_webhook", delivery_id)
            created += ids
            subscription.cursor = cursor
            subscription.save(update_fields=["cursor"])
    return created


# ---------------------------------------------------------------- delivery


def payload_of(delivery: Delivery) -> dict[str, Any]:
    """The body a receiver gets: the Standard Webhooks shape (type, timestamp, data)."""
    event = delivery.event
    return {
        "type": delivery.event_type,
        "timestamp": event.created_at.astimezone(dt.UTC).isoformat(timespec="seconds"),
        "data": {
            "sequence": event.sequence,
            "action": event.action,
            "actor": event.actor_label,
            "subject": {
                "type": event.subject_type,
                "id": event.subject_id,
                "label": event.subject_label,
            },
            "service": event.service.slug if event.service_id and event.service else None,
            "payload": json.loads(event.payload),
            "hash": event.hash,
            "ledger": settings.LEDGER_BASE_URL,
        },
    }


def signed_request(delivery: Delivery, *, now: dt.datetime) -> tuple[bytes, dict[str, str]]:
    """The body and headers of one attempt, signed with the subscription's secret."""
    body = json.dumps(payload_of(delivery), separators=(",", ":"), ensure_ascii=False)
    moment = now.astimezone(dt.UTC)
    signature = Webhook(delivery.subscription.secret).sign(delivery.message_id, moment, body)
    headers = {
        "content-type": "application/json",
        "user-agent": USER_AGENT,
        "webhook-id": delivery.message_id,
        "webhook-timestamp": str(int(moment.timestamp())),
        "webhook-signature": signature,
    }
    return body.encode(), headers


@dataclass(frozen=True)
class Attempt:
    ok: bool
    status: int | None
    latency_ms: int
    error: str


async def _post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, float]:
    timeout = httpx.Timeout(settings.WEBHOOK_TIMEOUT_SECONDS)
    async with guarded_client(timeout=timeout, policy=DestinationPolicy.for_webhooks()) as client:
        started = time.perf_counter()
        response = await client.post(url, content=body, headers=headers)
        return response.status_code, time.perf_counter() - started


def post(delivery: Delivery, *, now: dt.datetime) -> Attempt:
    body, headers = signed_request(delivery, now=now)
    started = time.perf_counter()
    try:
        status, elapsed = asyncio.run(_post(delivery.subscription.url, body, headers))
    except httpx.HTTPError as error:
        latency = int((time.perf_counter() - started) * 1000)
        return Attempt(False, None, latency, f"{type(error).__name__}: {error}"[:500])
    ok = 200 <= status < 300
    return Attempt(ok, status, int(elapsed * 1000), "" if ok else f"answered HTTP {status}")


def backoff_seconds(attempts: int) -> float:
    """Seconds before attempt `attempts + 1`: the base, doubling, capped."""
    delay = settings.WEBHOOK_RETRY_BASE_SECONDS * 2 ** max(attempts - 1, 0)
    return float(min(delay, settings.WEBHOOK_RETRY_MAX_SECONDS))


@dataclass(frozen=True)
class Outcome:
    state: str  # the delivery's state after this attempt, or "skipped"
    retry_in: float | None = None


def deliver(delivery_id: int, *, manual: bool = False) -> Outcome:
    """One attempt of one delivery, recorded; says whether and when to try again."""
    delivery = (
        Delivery.objects.select_related("subscription", "event", "event__service")
        .filter(pk=delivery_id)
        .first()
    )
    if delivery is None or delivery.state in (Delivery.State.SUCCEEDED, Delivery.State.FAILED):
        return Outcome("skipped")
    if not manual and not delivery.subscription.is_active:
        return Outcome("skipped")
    now = timezone.now()
    attempt = post(delivery, now=now)
    return _record(delivery, attempt, now)


@transaction.atomic
def _record(delivery: Delivery, attempt: Attempt, now: dt.datetime) -> Outcome:
    subscription = _lock(delivery.subscription)
    delivery.attempts += 1
    delivery.response_code = attempt.status
    delivery.latency_ms = attempt.latency_ms
    delivery.error = attempt.error
    delivery.last_attempt_at = now
    retry_in = None
    if attempt.ok:
        delivery.state = Delivery.State.SUCCEEDED
        delivery.delivered_at = now
        delivery.next_attempt_at = None
        if subscription.failing_since is not None:
            subscription.failing_since = None
            subscription.save(update_fields=["failing_since", "updated_at"])
    else:
        if subscription.failing_since is None:
            subscription.failing_since = now
            subscription.save(update_fields=["failing_since", "updated_at"])
        failing_for = now - subscription.failing_since
        limit = dt.timedelta(hours=settings.WEBHOOK_PAUSE_AFTER_HOURS)
        if failing_for >= limit and subscription.is_active:
            since = timezone.localtime(subscription.failing_since)
            pause_subscription(
                subscription,
                actor=None,
                reason=f"failing since {since:%Y-%m-%d %H:%M %Z}, for more than "
                f"{settings.WEBHOOK_PAUSE_AFTER_HOURS} h: paused by the ledger",
            )
        if failing_for >= limit or delivery.attempts >= settings.WEBHOOK_MAX_ATTEMPTS:
            delivery.state = Delivery.State.FAILED
            delivery.next_attempt_at = None
        else:
            retry_in = backoff_seconds(delivery.attempts)
            delivery.state = Delivery.State.RETRYING
            delivery.next_attempt_at = now + dt.timedelta(seconds=retry_in)
    delivery.save(
        update_fields=[
            "attempts",
            "response_code",
            "latency_ms",
            "error",
            "last_attempt_at",
            "state",
            "delivered_at",
            "next_attempt_at",
        ]
    )
    return Outcome(delivery.state, retry_in)


__all__ = [
    "Attempt",
    "Outcome",
    "backoff_seconds",
    "create_subscription",
    "delete_subscription",
    "deliver",
    "dispatch",
    "new_secret",
    "pause_subscription",
    "payload_of",
    "resend_delivery",
    "resume_subscription",
    "signed_request",
]
