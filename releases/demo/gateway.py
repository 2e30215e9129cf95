"""A demo gateway that has not applied dataagent-sql's rollout: the deployer missed the
emergency release's config, so the gateway still sends all of dataagent-sql to its live
backend and none to the candidate's. Recorded through the check's own verb
(`releases.gateway.services.checks.record_check`) with what a LiteLLM proxy on that older config
would report, once ten minutes ago (first seen) and once now (past the grace: an
unauthorized change of kind gateway, open on the incident screen and the service page).
Every other demo service is recorded in sync; with no gateway configured those rows read
as unknown once they are older than three check intervals.

Idempotent: nothing is added when a gateway finding exists.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.utils import timezone

from releases.gateway.litellm import render_config
from releases.gateway.queries import gateway
from releases.gateway.services import checks as services
from releases.models import UnauthorizedChange

DRIFTED = "dataagent-sql"


def reported_by_litellm(config: dict[str, Any]) -> list[dict[str, Any]]:
    """What LiteLLM's /model/info answers for a config: the key dropped, its own flags added
    (see `releases.gateway.drift`)."""
    reported = []
    for entry in config["model_list"]:
        params = {k: v for k, v in entry["litellm_params"].items() if k != "api_key"}
        params |= {"use_in_pass_through": False, "use_litellm_proxy": False}
        reported.append(
            {
                "model_name": entry["model_name"],
                "litellm_params": params,
                "model_info": dict(entry["model_info"]),
            }
        )
    return reported


def _not_applied(running: list[dict[str, Any]], slug: str) -> list[dict[str, Any]]:
    """The gateway before ``slug``'s rollout: its first deployment carries everything, the
    others (the candidate's) are not there. A service with one deployment gets half its
    weight and an rpm nobody recorded instead (someone edited the file by hand)."""
    own = [entry for entry in running if entry["model_name"] == slug]
    others = [entry for entry in running if entry["model_name"] != slug]
    if not own:
        return running
    first = own[0]
    if len(own) > 1:
        first["litellm_params"]["weight"] = sum(e["litellm_params"]["weight"] for e in own)
        return [*others, first]
    first["litellm_params"]["weight"] = max(first["litellm_params"]["weight"] // 2, 1)
    first["litellm_params"]["rpm"] = 120
    return [*others, first]


def seed_gateway_drift() -> int:
    """Record the demo's gateway checks; returns how many findings were opened."""
    if UnauthorizedChange.objects.filter(kind=UnauthorizedChange.Kind.GATEWAY).exists():
        return 0
    now = timezone.now()
    running = _not_applied(reported_by_litellm(render_config(gateway().routes)), DRIFTED)
    services.record_check(running, now=now - dt.timedelta(minutes=10))
    outcome = services.record_check(running, now=now)
    return len(outcome.opened) if outcome is not None else 0
