"""From the ledger to a real LiteLLM proxy: the config rendered from the database (the
live backends, the rolling-out candidate's weighted by its stage) routes real requests,
and a promotion, rendered again and read by the proxy, moves the share. The config is
the whole proxy's, as render_gateway writes it with GATEWAY_PROMETHEUS_METRICS on: the
proxy's own /metrics counts what each backend says it received."""

from __future__ import annotations

import datetime as dt

import httpx
import pytest
import time_machine
from prometheus_client.parser import text_string_to_metric_families

from releases.gateway.litellm import deployment_id
from releases.gateway.queries import gateway, whole_config_text
from releases.governance import services
from releases.models import Stage
from replay.models import Backend
from tests.releases.factories import observe, roll_out
from tests.releases.gateway.test_litellm_proxy import _assert_binomial, _counts, _send

pytestmark = pytest.mark.django_db

REQUESTS = 300
GOOD = {"requests": 1200, "ttft_p95_ms": 640, "error_rate_pct": 0.2, "json_valid_pct": 99.5}


def _serve_from(backend: Backend, fake) -> None:
    Backend.objects.filter(pk=backend.pk).update(base_url=fake.base, model_name=fake.served_model)


@pytest.fixture(autouse=True)
def _gateway_metrics(settings):
    settings.GATEWAY_PROMETHEUS_METRICS = True
    settings.GATEWAY_METRICS_REQUIRE_AUTH = True


def _rendered() -> str:
    return whole_config_text(gateway(["kb-assistant"]).routes)


def _successes_by_deployment(proxy) -> dict[str, float]:
    """litellm_deployment_success_responses, per model_info.id, as a scrape reads it."""
    with proxy.client() as client:
        answer = client.get("/metrics/")
    assert answer.status_code == 200, answer.text
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(answer.text):
        for sample in family.samples:
            if sample.name == "litellm_deployment_success_responses_total":
                model_id = sample.labels["model_id"]
                found[model_id] = found.get(model_id, 0) + sample.value
    return found


def _route_through(proxy, backends) -> None:
    proxy.use(_rendered())
    for backend in backends:  # LiteLLM asks each deployment for /v1/models as it starts
        backend.reset()


def test_a_rollout_rendered_by_the_ledger_moves_real_traffic(
    world, release, owner, signers, sre, fake_backends, litellm_gateway
):
    live_fake, candidate_fake = fake_backends
    _serve_from(world.live_backend, live_fake)
    _serve_from(world.candidate_backend, candidate_fake)
    roll_out(release, owner, signers)  # stage 1 carries 5 %

    _route_through(litellm_gateway, fake_backends)
    codes = _send(litellm_gateway, "kb-assistant", REQUESTS)
    at_five = _counts(fake_backends)
    # The proxy's own count per deployment is each backend's (the policy of kb-assistant
    # has no retries that could send one request twice), and /metrics wants a key.
    assert _successes_by_deployment(litellm_gateway) == {
        deployment_id("kb-assistant", world.live_backend.pk): at_five[0],
        deployment_id("kb-assistant", world.candidate_backend.pk): at_five[1],
    }
    assert httpx.get(f"{litellm_gateway.base_url}/metrics/", timeout=30).status_code == 401

    observe(release, sre, GOOD)
    stage = Stage.objects.get(release=release, number=1)
    with time_machine.travel(stage.started_at + dt.timedelta(minutes=61)):
        services.promote_release(release, actor=sre)  # stage 2 carries 25 %
    _route_through(litellm_gateway, fake_backends)
    codes += _send(litellm_gateway, "kb-assistant", REQUESTS)
    at_twenty_five = _counts(fake_backends)

    assert codes == [200] * (2 * REQUESTS)
    assert sum(at_five) == sum(at_twenty_five) == REQUESTS
    _assert_binomial(at_five[1], REQUESTS, 0.05)
    _assert_binomial(at_twenty_five[1], REQUESTS, 0.25)
    assert at_twenty_five[1] > at_five[1]
