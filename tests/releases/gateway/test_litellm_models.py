"""What the ledger renders for LiteLLM, read by LiteLLM's own models (in .venv-litellm/)."""

from __future__ import annotations

import copy

from releases.gateway.litellm import (
    Deployment,
    ServiceRoute,
    key_requests,
    render_config,
    split_weights,
    team_requests,
)
from tests.releases.gateway.test_litellm_render import POLICY
from tests.support.litellm_proxy import validate_with_litellm


def _routes() -> list[ServiceRoute]:
    weights = split_weights(10, [1, 2], [3])
    deployments = [
        Deployment(b, f"http://10.0.0.{b}:8000/v1", "llama", "KB_KEY" if b == 1 else None, w)
        for b, w in weights.items()
    ]
    bare = copy.deepcopy(POLICY)
    bare["tenants"] = [{"name": "ops"}]
    bare["fallbacks"] = [{"on": "error", "to_service": "support-faq"}]
    return [
        ServiceRoute("kb-assistant", deployments, POLICY),
        ServiceRoute("kb-long", [Deployment(4, "http://10.0.0.4:8000/v1", "long", None, 1)], bare),
        ServiceRoute(
            "support-faq", [Deployment(5, "http://10.0.0.5:8000/v1", "faq", None, 1)], None
        ),
    ]


def test_team_and_key_bodies_are_valid_litellm_requests_with_every_field_known():
    routes = _routes()
    teams = [body for route in routes for body in team_requests(route)]
    keys = [body for route in routes for body in key_requests(route)]
    assert len(teams) == 3 and len(keys) == 1  # every tenant; the one with a concurrency limit

    problems = validate_with_litellm({"NewTeamRequest": teams, "GenerateKeyRequest": keys})

    assert problems == {"NewTeamRequest": [], "GenerateKeyRequest": []}


def test_the_validator_can_fail():
    """A misspelt field and a wrong type are caught, not silently dropped by pydantic."""
    problems = validate_with_litellm(
        {
            "NewTeamRequest": [{"team_alias": "x", "max_parallel_requests": 4}],
            "GenerateKeyRequest": [{"max_parallel_requests": "many"}],
        }
    )

    assert problems["NewTeamRequest"] == ["max_parallel_requests: not a field of NewTeamRequest"]
    assert len(problems["GenerateKeyRequest"]) == 1
    assert "max_parallel_requests" in problems["GenerateKeyRequest"][0]


def test_the_rendered_config_builds_a_litellm_router():
    config = render_config(_routes())

    assert validate_with_litellm({"config": [config]}) == {"config": []}
