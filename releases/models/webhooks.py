"""Signed outbound webhooks: who is told what, and each delivery's log.

A subscription names a URL and the event types it wants (friendly names,
mapped to ledger actions in `releases.audit.webhook_types`). Its cursor is the last
event sequence the dispatcher has looked at for it; a delivery is one event
for one subscription, with its attempts, the last answer and when it is
tried next. The secret signs every payload (Standard Webhooks); it is shown
once, when the subscription is created, and never rendered again.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from lib.choices import ChoiceLabels


class WebhookSubscription(ChoiceLabels, models.Model):
    class State(models.TextChoices):
        ACTIVE = "active", _("Active")
        PAUSED = "paused", _("Paused")

    name = models.CharField(max_length=120, help_text=_("What receives it, e.g. Change board bot."))
    url = models.URLField(max_length=500, help_text=_("Where events are POSTed."))
    event_types = models.JSONField(default=list, help_text=_("Friendly event type names."))
    secret = models.CharField(max_length=100, editable=False)
    state = models.CharField(max_length=8, choices=State.choices, default=State.ACTIVE)
    paused_reason = models.CharField(max_length=300, blank=True)
    failing_since = models.DateTimeField(
        null=True, blank=True, help_text=_("The first failed attempt since the last success.")
    )
    cursor = models.PositiveBigIntegerField(
        default=0, help_text=_("The last event sequence the dispatcher has looked at.")
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(state__in=["active", "paused"]),
                name="releases_webhooksubscription_state_valid",
            ),
            models.CheckConstraint(
                condition=~Q(secret=""), name="releases_webhooksubscription_has_secret"
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def is_active(self) -> bool:
        return self.state == self.State.ACTIVE


class Delivery(ChoiceLabels, models.Model):
    class State(models.TextChoices):
        PENDING = "pending", _("Pending")
        RETRYING = "retrying", _("Retrying")
        SUCCEEDED = "succeeded", _("Delivered")
        FAILED = "failed", _("Failed")

    subscription = models.ForeignKey(
        WebhookSubscription, on_delete=models.CASCADE, related_name="deliveries"
    )
    # Events are never deleted; no database constraint, as for every reference to them.
    event = models.ForeignKey(
        "ledger.Event", on_delete=models.DO_NOTHING, db_constraint=False, related_name="+"
    )
    event_type = models.CharField(max_length=40)
    message_id = models.CharField(
        max_length=80, help_text=_("The webhook-id header: same on retries.")
    )
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    response_code = models.PositiveSmallIntegerField(null=True, blank=True)
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            # The dispatcher may look at an event twice (a retried task): one delivery.
            models.UniqueConstraint(
                fields=["subscription", "event"], name="releases_delivery_once_per_event"
            ),
            models.CheckConstraint(
                condition=Q(state__in=["pending", "retrying", "succeeded", "failed"]),
                name="releases_delivery_state_valid",
            ),
        ]
        indexes = [
            # A subscription's delivery log, newest first.
            models.Index(
                fields=["subscription", "-created_at", "-id"], name="releases_delivery_log_idx"
            ),
        ]

    def __str__(self) -> str:
        return f"delivery {self.pk} of event #{self.event_id} to {self.subscription_id}"
