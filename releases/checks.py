"""System checks of the releases app's settings (`manage.py check --deploy`)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Tags, register
from django.core.checks import Warning as CheckWarning


@register(Tags.security, deploy=True)
def webhooks_have_their_own_allow_list(
    app_configs: Any = None, **kwargs: Any
) -> list[CheckMessage]:
    """A deployment from before WEBHOOK_ALLOWED_HOSTS posts webhooks wherever replay
    may connect (its inference network too) until an operator lists the receivers."""
    if settings.WEBHOOK_ALLOWED_HOSTS is not None:
        return []
    return [
        CheckWarning(
            "WEBHOOK_ALLOWED_HOSTS is unset, so webhooks may be posted to every host "
            "REPLAY_ALLOWED_HOSTS lets replay reach.",
            hint=(
                "List the webhook receivers' hosts in WEBHOOK_ALLOWED_HOSTS (host, .domain "
                "or network, each with an optional :port); set it empty if no webhook may "
                "go anywhere."
            ),
            id="releases.W001",
        )
    ]


@register(Tags.security, deploy=True)
def gateway_is_an_allowed_host(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """The gateway check connects only where replay may (`releases.gateway.services.checks`): a
    GATEWAY_URL outside REPLAY_ALLOWED_HOSTS would leave every service *unknown*."""
    from replay.outbound import DestinationPolicy, base_url_problem

    if not settings.GATEWAY_URL:
        return []
    policy = DestinationPolicy(
        settings.REPLAY_ALLOWED_HOSTS, setting="REPLAY_ALLOWED_HOSTS", purpose="the gateway check"
    )
    problem = base_url_problem(settings.GATEWAY_URL, policy)
    if not problem:
        return []
    return [
        CheckWarning(
            f"GATEWAY_URL={settings.GATEWAY_URL} cannot be checked: {problem}",
            hint="Add the gateway's host (and port) to REPLAY_ALLOWED_HOSTS.",
            id="releases.W002",
        )
    ]
