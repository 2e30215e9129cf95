"""From the ledger to a real LiteLLM proxy: the config rendered from the database (the
live backends, the rolling-out candidate's weighted by its stage) routes real requests,
and a promotion, rendered again and read by the proxy, moves the share."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine

from releases.gateway import litellm
from releases.gateway.queries import gateway
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


def _rendered() -> str:
    return litellm.render_yaml(litellm.render_config(gateway(["kb-assistant"]).routes))


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
