"""How the gateway check reads on a page: each difference as a sentence, and a service's
state as the check last found it (a stale or missing check is unknown, never in sync)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django import template
from django.utils import timezone
from django.utils.translation import gettext as _

from ledger.models import Service
from releases.gateway.drift import DEPLOYMENT, MODEL_NAME
from releases.models import read_check

register = template.Library()


@register.filter
def gateway_difference(item: dict[str, Any], slug: str) -> str:
    """One difference of a gateway finding, as the SRE reads it: "the gateway serves
    kb-assistant with weight 9500 on deployment kb-assistant-backend-7; the ledger says 7500"."""
    values = {
        "slug": slug,
        "what": item.get("what"),
        "deployment": item.get("deployment"),
        "ledger": item.get("ledger"),
        "gateway": item.get("gateway"),
    }
    if item.get("what") == DEPLOYMENT:
        if item.get("gateway") is None:
            return (
                _(
                    "the gateway does not serve deployment %(deployment)s of %(slug)s; "
                    "the ledger routes it with weight %(ledger)s"
                )
                % values
            )
        return (
            _(
                "the gateway serves %(slug)s on deployment %(deployment)s with weight "
                "%(gateway)s; the ledger does not route it"
            )
            % values
        )
    if item.get("what") == MODEL_NAME:
        return (
            _(
                "the gateway serves deployment %(deployment)s as %(gateway)s; the ledger says %(ledger)s"
            )
            % values
        )
    if item.get("gateway") is None:
        return (
            _(
                "the gateway serves %(slug)s with no %(what)s on deployment %(deployment)s; "
                "the ledger says %(ledger)s"
            )
            % values
        )
    if item.get("ledger") is None:
        return (
            _(
                "the gateway serves %(slug)s with %(what)s %(gateway)s on deployment "
                "%(deployment)s; the ledger sets none"
            )
            % values
        )
    return (
        _(
            "the gateway serves %(slug)s with %(what)s %(gateway)s on deployment "
            "%(deployment)s; the ledger says %(ledger)s"
        )
        % values
    )


# Plain strings as keys: a TextChoices member hashes by its name, not its value.
_LABELS = {
    "in_sync": lambda: _("gateway in sync"),
    "drifted": lambda: _("gateway drifted"),
    "unknown": lambda: _("gateway unknown"),
}


@register.simple_tag
def gateway_state(service: Service, now: dt.datetime | None = None) -> dict[str, Any]:
    """The service's last check (read with the service: ``select_related("gateway_check")``)
    as `read_check` says it at `now`, with its label."""
    reading = read_check(getattr(service, "gateway_check", None), now or timezone.now())
    return {**vars(reading), "label": _LABELS[str(reading.state)]()}
