"""The rendered config in a real LiteLLM proxy, in front of two fake backends.

One proxy start serves every test here; `test_gateway_proxy_from_ledger.py` renders the
config from the database and restarts the proxy on a promotion (LiteLLM re-reads its
file only by restarting without a database). What each backend received is counted by
the backend itself.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import pytest

from releases.gateway.litellm import (
    Deployment,
    ServiceRoute,
    config_sha256,
    render_config,
    render_yaml,
    split_weights,
)
from tests.releases.gateway.conftest import KEYED_ENV, KEYED_SECRET

REQUESTS = 300
# A share outside this many standard deviations of the binomial is a failure: at 300
# requests and 20 %, a band of 60 ± 31 requests.
SIGMAS = 4.5
LIVE, CANDIDATE = 1, 2


def _config(share_pct: float, backends, keyed) -> str:
    """The gateway during a rollout of kb-assistant at ``share_pct``, and its neighbours."""
    live, candidate = backends

    def deployments(weights: dict[int, int]) -> list[Deployment]:
        by_id = {LIVE: live, CANDIDATE: candidate}
        return [
            Deployment(b, by_id[b].api_base, by_id[b].served_model, None, weight)
            for b, weight in weights.items()
        ]

    # Every limit of the policy, so the proxy is seen to accept each rendered field.
    strict = {
        "limits": {
            "max_input_tokens": 64,
            "max_output_tokens": 32,
            "timeout_s": 60,
            "stream_timeout_s": 30,
            "max_parallel_requests": 64,
        }
    }
    routes = [
        ServiceRoute(
            "kb-assistant",
            deployments(split_weights(share_pct, [LIVE], [CANDIDATE])),
            {
                **strict,
                "fallbacks": [{"on": "context_window", "to_service": "kb-long"}],
                "retries": {"num_retries": 1, "allowed_fails": 3, "cooldown_s": 5},
            },
        ),
        # An aborted rollout: the candidate at 0 %.
        ServiceRoute("kb-aborted", deployments(split_weights(0, [LIVE], [CANDIDATE])), strict),
        ServiceRoute(
            "kb-long",
            deployments(split_weights(0, [LIVE], [])),
            {"limits": {"max_input_tokens": 4096}},
        ),
        # Two requests at a time per backend, no retry to hide a refusal.
        ServiceRoute(
            "kb-narrow",
            deployments(split_weights(0, [LIVE], [])),
            {"limits": {"max_parallel_requests": 2}, "retries": {"num_retries": 0}},
        ),
        ServiceRoute(
            "kb-keyed",
            [Deployment(3, f"{keyed.base_url}/v1", "served-keyed", KEYED_ENV, 1)],
            None,
        ),
    ]
    return render_yaml(render_config(routes))


def _send(gateway, model: str, n: int, content: str = "hello") -> list[int]:
    body = {"model": model, "messages": [{"role": "user", "content": content}], "max_tokens": 4}
    with gateway.client() as client, ThreadPoolExecutor(8) as pool:
        responses = pool.map(lambda _: client.post("/v1/chat/completions", json=body), range(n))
        return [response.status_code for response in responses]


def _counts(backends) -> tuple[int, int]:
    return backends[0].received(), backends[1].received()


def _assert_binomial(got: int, n: int, p: float) -> None:
    sd = math.sqrt(n * p * (1 - p))
    assert abs(got - n * p) <= SIGMAS * sd, (
        f"{got} of {n}, expected {n * p:.0f} ± {SIGMAS * sd:.0f}"
    )


@pytest.mark.parametrize(("got", "p"), [(150, 0.2), (30, 0.8), (0, 0.2), (95, 0.2)])
def test_the_share_check_fails_on_a_share_the_weights_would_not_give(got, p):
    """No proxy: the band is narrow enough that an even split, or the weights swapped,
    would fail the real tests below (60 ± 31 of 300 at 20 %)."""
    with pytest.raises(AssertionError):
        _assert_binomial(got, REQUESTS, p)
    _assert_binomial(round(REQUESTS * p), REQUESTS, p)


@pytest.fixture
def backends(fake_backends):
    return fake_backends


@pytest.fixture
def stage(litellm_gateway, fake_backends, keyed_backend):
    """``stage(share_pct)``: the proxy on the config of that stage, counts from zero."""
    return lambda share_pct: _use(litellm_gateway, fake_backends, keyed_backend, share_pct)


def _use(gateway, backends, keyed, share_pct: float) -> None:
    """The proxy on the config of this stage, and the backends' counts from zero.

    The counts are reset after the (re)start: while it starts, before /health/liveliness
    answers, LiteLLM sends each deployment a GET /v1/models, which the fakes record too.
    """
    gateway.use(_config(share_pct, backends, keyed))
    for backend in backends:
        backend.reset()


def test_each_backend_gets_the_share_of_its_stage_weight(litellm_gateway, backends, stage):
    stage(20)

    codes = _send(litellm_gateway, "kb-assistant", REQUESTS)

    assert codes == [200] * REQUESTS
    live, candidate = _counts(backends)
    assert live + candidate == REQUESTS
    assert live > 0 and candidate > 0
    _assert_binomial(candidate, REQUESTS, 0.20)


def test_the_running_gateway_reports_the_deployments_and_weights_rendered(litellm_gateway, stage):
    stage(20)

    with litellm_gateway.client() as client:
        data = client.get("/model/info").json()["data"]

    seen = {
        entry["model_info"]["id"]: (
            entry["litellm_params"].get("weight"),
            entry["model_info"].get("max_input_tokens"),
        )
        for entry in data
    }
    assert seen == {
        "kb-assistant-backend-1": (8000, 64),
        "kb-assistant-backend-2": (2000, 64),
        "kb-aborted-backend-1": (10000, 64),
        "kb-long-backend-1": (10000, 4096),
        "kb-narrow-backend-1": (10000, 4096),
        # No limit in its policy: LiteLLM asked the backend (GET /v1/models at start) and
        # took the fake vLLM's max_model_len. A drift check must expect that, not None.
        "kb-keyed-backend-3": (1, 4096),
    }


def test_a_candidate_at_zero_percent_gets_nothing(litellm_gateway, backends, stage):
    stage(20)

    codes = _send(litellm_gateway, "kb-aborted", 100)

    assert codes == [200] * 100
    assert _counts(backends) == (100, 0)


def test_a_request_over_max_input_tokens_is_refused_by_the_proxy(litellm_gateway, backends, stage):
    stage(20)

    with litellm_gateway.client() as client:
        response = client.post(
            "/v1/chat/completions",
            json={"model": "kb-aborted", "messages": [{"role": "user", "content": "word " * 300}]},
        )

    assert response.status_code == 400
    assert "ContextWindowExceededError" in response.text
    assert _counts(backends) == (0, 0)  # refused before any backend saw it


def test_an_over_long_request_goes_to_the_context_window_fallback(litellm_gateway, backends, stage):
    stage(20)

    with litellm_gateway.client() as client:
        response = client.post(
            "/v1/chat/completions",
            json={
                "model": "kb-assistant",
                "messages": [{"role": "user", "content": "word " * 300}],
            },
        )

    assert response.status_code == 200
    # The proxy names the deployment that answered by the model_info.id the ledger gave it.
    assert response.headers["x-litellm-model-id"] == "kb-long-backend-1"
    assert _counts(backends) == (1, 0)  # kb-long is served by the live backend only


def test_a_backend_at_its_max_parallel_requests_refuses_more_with_429(
    litellm_gateway, backends, stage
):
    stage(20)

    # Each answer takes 1.5 s at the backend (the fake's directive), six at once.
    codes = _send(litellm_gateway, "kb-narrow", 6, content="fake: ttft_ms=1500")

    assert sorted(set(codes)) == [200, 429], codes
    assert codes.count(200) >= 2
    assert _counts(backends) == (codes.count(200), 0)


def test_a_backends_key_comes_from_the_proxys_environment_never_the_config(
    litellm_gateway, stage, keyed_backend
):
    stage(20)
    keyed_backend.handler.requests.clear()

    codes = _send(litellm_gateway, "kb-keyed", 3)

    assert codes == [200] * 3
    assert [r.headers["authorization"] for r in keyed_backend.chat_requests] == [
        f"Bearer {KEYED_SECRET}"
    ] * 3
    assert KEYED_SECRET not in litellm_gateway.config_text
    assert f"api_key: os.environ/{KEYED_ENV}" in litellm_gateway.config_text
    assert config_sha256(litellm_gateway.config_text) == config_sha256(
        (litellm_gateway.folder / "config.yaml").read_text()
    )
