"""The scrape of the gateway's ``/metrics`` that opens the day being counted
(`releases.gateway.services.gateway_day.scrape_gateway`): one row per gateway URL,
replaced by the first scrape of each day, never a history."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _


class GatewayMetricsScrape(models.Model):
    """The first scrape of the current day (UTC) of the gateway at `url`. The first
    scrape of the next day closes the window: every service the gateway counted gets
    its day, by tenant, task type and backend, from the two."""

    url = models.CharField(max_length=500, unique=True, help_text=_("The gateway's base URL."))
    taken_at = models.DateTimeField()
    text = models.TextField(help_text=_("The exposition text as the gateway answered it."))

    def __str__(self) -> str:
        return f"metrics of {self.url} at {self.taken_at:%Y-%m-%d %H:%M}"
