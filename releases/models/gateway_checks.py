"""What the latest check of the running LLM gateway found for each live service
(`releases.gateway.services.checks.check_gateway`): one row per service, rewritten by every
check, so the table holds as many rows as there are live services, never a history (the
changes of state are Events)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from lib.choices import ChoiceLabels

# A row older than this many check intervals says nothing about now: the beat stopped,
# or the check is switched off. It reads as unknown.
STALE_AFTER_INTERVALS = 3


class GatewayCheck(ChoiceLabels, models.Model):
    """The running gateway compared with the config the ledger renders, for one service.

    *in sync*: every deployment, weight and limit the ledger renders is what the gateway
    reports. *drifted*: `found` lists each difference (`releases.gateway.drift`).
    *unknown*: the gateway could not be read (`reason` says why); never in sync.
    """

    class State(models.TextChoices):
        IN_SYNC = "in_sync", _("in sync")
        DRIFTED = "drifted", _("drifted")
        UNKNOWN = "unknown", _("unknown")

    service = models.OneToOneField(
        "ledger.Service", on_delete=models.CASCADE, related_name="gateway_check"
    )
    state = models.CharField(max_length=16, choices=State.choices)
    since = models.DateTimeField(help_text=_("When this state, and these differences, began."))
    checked_at = models.DateTimeField()
    found = models.JSONField(
        default=list, blank=True, help_text=_("Each difference: deployment, what, ledger, gateway.")
    )
    reason = models.TextField(blank=True, help_text=_("Why the gateway could not be read."))

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(state__in=["in_sync", "drifted", "unknown"]),
                name="releases_gatewaycheck_state_valid",
            ),
            models.CheckConstraint(
                condition=~Q(state="unknown") | ~Q(reason=""),
                name="releases_gatewaycheck_unknown_says_why",
            ),
            models.CheckConstraint(
                condition=Q(checked_at__gte=models.F("since")),
                name="releases_gatewaycheck_checked_after_since",
            ),
        ]

    def __str__(self) -> str:
        return f"gateway {self.state} for {self.service_id}"

    def is_stale(self, now: dt.datetime) -> bool:
        every = dt.timedelta(minutes=settings.GATEWAY_CHECK_EVERY_MINUTES)
        return now - self.checked_at > STALE_AFTER_INTERVALS * every

    def state_at(self, now: dt.datetime) -> str:
        """The state to show at `now`: a stale row is unknown, never in sync."""
        return self.State.UNKNOWN if self.is_stale(now) else self.state


@dataclass(frozen=True)
class CheckReading:
    """What a service's last check says at an instant, as every page and the API show it:
    no check, or a stale one, is unknown (with the reason), never in sync; the
    differences are shown only while drifted."""

    state: str
    checked_at: dt.datetime | None
    since: dt.datetime | None
    stale: bool
    reason: str
    found: list[dict[str, Any]] = field(default_factory=list)


def read_check(check: GatewayCheck | None, now: dt.datetime) -> CheckReading:
    if check is None:
        return CheckReading(
            state=GatewayCheck.State.UNKNOWN,
            checked_at=None,
            since=None,
            stale=True,
            reason=gettext("the gateway has not been checked for this service"),
        )
    stale = check.is_stale(now)
    state = check.state_at(now)
    return CheckReading(
        state=state,
        checked_at=check.checked_at,
        since=check.since,
        stale=stale,
        reason=(
            gettext("the last check is too old to say what the gateway does now")
            if stale
            else check.reason
        ),
        found=check.found if state == GatewayCheck.State.DRIFTED else [],
    )
