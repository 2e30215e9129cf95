"""The gateway circuit-breaker playbook (issue 34, §6.6) names what a real LiteLLM proxy
shows: every LiteLLM metric it tells the on-call engineer to read is one the proxy the
ledger configures exposes, and its breaker settings are the gateway policy's."""

from __future__ import annotations

import re

import pytest

from releases.gateway.queries import gateway, whole_config_text
from releases.governance import playbooks

pytestmark = pytest.mark.django_db


def test_the_circuit_breaker_playbook_names_metrics_the_proxy_exposes(
    world, litellm_gateway, settings
):
    settings.GATEWAY_PROMETHEUS_METRICS = True
    settings.GATEWAY_METRICS_REQUIRE_AUTH = True
    settings.GATEWAY_API_KEY = litellm_gateway.master_key
    playbook = playbooks.DEFAULT_PLAYBOOKS["circuit_open"]
    named = set(re.findall(r"\blitellm_[a-z_]+", " ".join(playbook.diagnosis)))
    assert named == {"litellm_deployment_cooled_down_total", "litellm_deployment_state"}
    config = whole_config_text(gateway([world.service.slug]).routes)
    litellm_gateway.use(config)
    with litellm_gateway.client() as client:
        answer = client.get("/metrics/")
    assert answer.status_code == 200, answer.text
    exposed = set(re.findall(r"^# TYPE (\w+) ", answer.text, flags=re.MULTILINE))
    assert named <= exposed, sorted(named - exposed)
    # The settings it says to check are the ones the ledger renders from the policy.
    assert "allowed_fails" in config and "cooldown_time" in config
    assert "allowed_fails" in playbook.diagnosis[2] and "cooldown_s" in playbook.diagnosis[2]
