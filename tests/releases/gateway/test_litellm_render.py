"""The LiteLLM config rendered from a gateway policy: pure, no database, no proxy."""

from __future__ import annotations

import copy
import re

import pytest
import yaml

from releases.gateway.litellm import (
    KEYLESS_API_KEY_ENV,
    WEIGHT_TOTAL,
    Deployment,
    ServiceRoute,
    config_sha256,
    key_requests,
    render_config,
    render_yaml,
    split_weights,
    team_requests,
)

# The policy document of issue 29, item 1.
POLICY = {
    "limits": {
        "max_input_tokens": 8192,
        "max_output_tokens": 1024,
        "timeout_s": 60,
        "stream_timeout_s": 30,
        "max_parallel_requests": 64,
    },
    "tenants": [
        {
            "name": "support",
            "rpm": 600,
            "tpm": 200000,
            "max_parallel_requests": 16,
            "budget": {"amount": 500, "currency": "USD", "period_days": 30},
        },
        {"name": "legal", "rpm": 60, "tpm": 20000},
    ],
    "fallbacks": [
        {"on": "context_window", "to_service": "kb-long"},
        {"on": "error", "to_service": "support-faq"},
    ],
    "degradation": {
        "chat": {"action": "fallback", "to_service": "support-faq"},
        "sql": {"action": "stop", "message": "The data assistant is busy; nothing was run."},
    },
    "retries": {"num_retries": 2, "allowed_fails": 3, "cooldown_s": 30},
    "egress": {"external_fallback_allowed": False},
}


def _deployment(backend_id: int, weight: int, key_env: str | None = None) -> Deployment:
    return Deployment(
        backend_id=backend_id,
        api_base=f"http://10.0.0.{backend_id}:8000/v1",
        served_model=f"llama-{backend_id}",
        api_key_env=key_env,
        weight=weight,
    )


def _kb_assistant() -> ServiceRoute:
    return ServiceRoute(
        "kb-assistant",
        [_deployment(7, 9000, "KB_VLLM_KEY"), _deployment(3, 1000)],
        POLICY,
    )


def test_every_policy_limit_lands_on_each_deployment_under_litellms_name():
    config = render_config([_kb_assistant()])

    first = config["model_list"][0]
    assert first == {
        "model_name": "kb-assistant",
        "litellm_params": {
            "model": "openai/llama-3",
            "api_base": "http://10.0.0.3:8000/v1",
            "api_key": f"os.environ/{KEYLESS_API_KEY_ENV}",
            "weight": 1000,
            "timeout": 60,
            "stream_timeout": 30,
            "max_parallel_requests": 64,
            "num_retries": 2,
        },
        "model_info": {
            "id": "kb-assistant-backend-3",
            "max_input_tokens": 8192,
            "max_output_tokens": 1024,
            "allowed_fails": 3,
            "cooldown_time": 30,
        },
    }
    assert config["model_list"][1]["litellm_params"]["api_key"] == "os.environ/KB_VLLM_KEY"
    assert config["router_settings"] == {
        "routing_strategy": "simple-shuffle",
        "enable_pre_call_checks": True,
        "fallbacks": [{"kb-assistant": ["support-faq"]}],
        "context_window_fallbacks": [{"kb-assistant": ["kb-long"]}],
        "content_policy_fallbacks": [],
    }
    assert config["general_settings"] == {"master_key": "os.environ/LITELLM_MASTER_KEY"}
    # Nothing LiteLLM does not document under these sections.
    assert set(config) == {"model_list", "router_settings", "general_settings"}


def test_a_policy_with_nothing_set_renders_only_the_deployments():
    config = render_config([ServiceRoute("bare", [_deployment(1, 10)], None)])

    assert config["model_list"] == [
        {
            "model_name": "bare",
            "litellm_params": {
                "model": "openai/llama-1",
                "api_base": "http://10.0.0.1:8000/v1",
                "api_key": f"os.environ/{KEYLESS_API_KEY_ENV}",
                "weight": 10,
            },
            "model_info": {"id": "bare-backend-1"},
        }
    ]
    assert config["router_settings"]["fallbacks"] == []
    assert config["router_settings"]["context_window_fallbacks"] == []


def test_per_deployment_rpm_and_tpm_are_rendered_only_from_the_backend_capacity():
    with_capacity = Deployment(1, "http://b/v1", "m", None, 5, rpm=300, tpm=90000)
    config = render_config([ServiceRoute("svc", [with_capacity], POLICY)])

    params = config["model_list"][0]["litellm_params"]
    assert (params["rpm"], params["tpm"]) == (300, 90000)
    # Tenants' rpm/tpm are team limits, never a deployment's.
    without = render_config([_kb_assistant()])["model_list"][0]["litellm_params"]
    assert "rpm" not in without and "tpm" not in without


def test_credentials_appear_only_as_environment_references():
    text = render_yaml(render_config([_kb_assistant()]))

    keys = re.findall(r"api_key: (.*)", text)
    assert keys and all(key.startswith("os.environ/") for key in keys)
    assert "master_key: os.environ/LITELLM_MASTER_KEY" in text


@pytest.mark.parametrize("pasted", ["sk-live-abc123", "Bearer x", "kb key", ""])
def test_a_key_value_where_a_variable_name_belongs_is_refused(pasted):
    route = ServiceRoute("svc", [_deployment(1, 1, key_env=pasted or "lower_case")], None)

    with pytest.raises(ValueError, match="not an environment variable name"):
        render_config([route])


def test_the_same_routes_give_the_same_bytes_in_any_order():
    other = ServiceRoute("analytics", [_deployment(2, 4), _deployment(1, 6)], {"limits": {}})
    one = render_yaml(render_config([_kb_assistant(), other]))
    two = render_yaml(
        render_config(
            [
                ServiceRoute(other.slug, list(reversed(other.deployments)), other.policy),
                ServiceRoute("kb-assistant", list(reversed(_kb_assistant().deployments)), POLICY),
            ]
        )
    )

    assert one == two
    assert config_sha256(one) == config_sha256(two)
    assert re.fullmatch(r"[0-9a-f]{64}", config_sha256(one))
    # Services by slug, deployments by backend id.
    ids = [entry["model_info"]["id"] for entry in yaml.safe_load(one)["model_list"]]
    assert ids == [
        "analytics-backend-1",
        "analytics-backend-2",
        "kb-assistant-backend-3",
        "kb-assistant-backend-7",
    ]


def test_libyamls_emitter_writes_the_same_text_as_pyyamls_own():
    # render_yaml uses libyaml's emitter for speed; the recorded sha256s must not depend
    # on which one a machine has.
    with_text = ServiceRoute(
        "kb-ünïcode",
        [_deployment(7, 9000, "KB_VLLM_KEY"), _deployment(3, 1000)],
        {**POLICY, "fallbacks": [{"on": "error", "to_service": "a-long-name-" + "x" * 90}]},
    )
    config = render_config([_kb_assistant(), with_text])
    config["router_settings"]["note"] = 'colons: quotes\' "and" # hashes, 0.5, yes, null, 1e3'

    assert yaml.__with_libyaml__
    assert render_yaml(config) == yaml.safe_dump(
        config, sort_keys=False, default_flow_style=False, allow_unicode=True
    )


def test_a_change_of_weight_changes_the_hash():
    before = render_yaml(render_config([_kb_assistant()]))
    promoted = ServiceRoute("kb-assistant", [_deployment(7, 5000), _deployment(3, 5000)], POLICY)

    assert config_sha256(render_yaml(render_config([promoted]))) != config_sha256(before)


def test_a_deployment_of_weight_zero_is_left_out():
    route = ServiceRoute("kb-assistant", [_deployment(7, WEIGHT_TOTAL), _deployment(3, 0)], POLICY)

    ids = [entry["model_info"]["id"] for entry in render_config([route])["model_list"]]
    assert ids == ["kb-assistant-backend-7"]


def test_fallbacks_of_several_services_use_litellms_list_of_single_key_dicts():
    policy = copy.deepcopy(POLICY)
    policy["fallbacks"] = [
        {"on": "error", "to_service": "support-faq"},
        {"on": "error", "to_service": "kb-lite"},
        {"on": "context_window", "to_service": "kb-long"},
    ]
    faq = ServiceRoute(
        "support-faq",
        [_deployment(9, 1)],
        {"fallbacks": [{"on": "error", "to_service": "kb-lite"}]},
    )

    settings = render_config([ServiceRoute("kb-assistant", [_deployment(1, 1)], policy), faq])[
        "router_settings"
    ]

    assert settings["fallbacks"] == [
        {"kb-assistant": ["support-faq", "kb-lite"]},
        {"support-faq": ["kb-lite"]},
    ]
    assert settings["context_window_fallbacks"] == [{"kb-assistant": ["kb-long"]}]


def test_a_content_policy_fallback_is_litellms_content_policy_fallbacks():
    policy = {"fallbacks": [{"on": "content_policy", "to_service": "kb-strict"}]}
    route = ServiceRoute("kb-assistant", [_deployment(1, 1)], policy)

    settings = render_config([route])["router_settings"]

    assert settings["content_policy_fallbacks"] == [{"kb-assistant": ["kb-strict"]}]
    assert settings["fallbacks"] == settings["context_window_fallbacks"] == []


@pytest.mark.parametrize(
    ("fallback", "message"),
    [
        ({"on": "context_window", "to_service": "kb-assistant"}, "to itself"),
        ({"on": "timeout", "to_service": "kb-long"}, "is not one of"),
    ],
)
def test_a_fallback_litellm_cannot_express_is_refused(fallback, message):
    route = ServiceRoute("kb-assistant", [_deployment(1, 1)], {"fallbacks": [fallback]})

    with pytest.raises(ValueError, match=message):
        render_config([route])


def test_a_service_or_a_backend_listed_twice_is_refused():
    with pytest.raises(ValueError, match="listed twice"):
        render_config([_kb_assistant(), _kb_assistant()])
    with pytest.raises(ValueError, match="listed twice"):
        render_config([ServiceRoute("svc", [_deployment(1, 1), _deployment(1, 2)], None)])


def test_degradation_and_egress_are_not_gateway_settings():
    text = render_yaml(render_config([_kb_assistant()]))

    assert "degradation" not in text and "egress" not in text and "async_queue" not in text


# -- tenants ---------------------------------------------------------------------------


def test_each_tenant_becomes_a_team_new_body():
    assert team_requests(_kb_assistant()) == [
        {
            "team_id": "kb-assistant--legal",
            "team_alias": "kb-assistant/legal",
            "models": ["kb-assistant"],
            "metadata": {"ledger_service": "kb-assistant", "ledger_tenant": "legal"},
            "rpm_limit": 60,
            "tpm_limit": 20000,
        },
        {
            "team_id": "kb-assistant--support",
            "team_alias": "kb-assistant/support",
            "models": ["kb-assistant"],
            "metadata": {"ledger_service": "kb-assistant", "ledger_tenant": "support"},
            "rpm_limit": 600,
            "tpm_limit": 200000,
            "max_budget": 500.0,
            "budget_duration": "30d",
        },
    ]


def test_a_tenants_concurrency_becomes_a_key_of_its_team():
    assert key_requests(_kb_assistant()) == [
        {
            "team_id": "kb-assistant--support",
            "key_alias": "kb-assistant/support",
            "models": ["kb-assistant"],
            "max_parallel_requests": 16,
        }
    ]


def test_a_budget_in_another_currency_than_litellms_is_refused():
    policy = copy.deepcopy(POLICY)
    policy["tenants"][0]["budget"]["currency"] = "EUR"

    with pytest.raises(ValueError, match="LiteLLM keeps budgets in USD, not EUR"):
        team_requests(ServiceRoute("kb-assistant", [], policy))


def test_no_policy_means_no_teams():
    route = ServiceRoute("svc", [], None)
    assert team_requests(route) == [] and key_requests(route) == []


# -- weights ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("share", "live", "candidate", "expected"),
    [
        (0, [1], [2], {1: 10000, 2: 0}),
        (10, [1], [2], {1: 9000, 2: 1000}),
        (50, [1], [2], {1: 5000, 2: 5000}),
        (100, [1], [2], {1: 0, 2: 10000}),
        # Uneven counts: the remainder goes one unit each to the lowest ids.
        (10, [5, 4, 6], [9, 8], {4: 3000, 5: 3000, 6: 3000, 8: 500, 9: 500}),
        (50, [1, 2, 3], [7], {1: 1667, 2: 1667, 3: 1666, 7: 5000}),
        (12.5, [1], [2, 3, 4], {1: 8750, 2: 417, 3: 417, 4: 416}),
        (33.333, [1, 2], [3], {1: 3334, 2: 3333, 3: 3333}),
        (0.005, [1], [2], {1: 9999, 2: 1}),  # half a unit rounds up, not to even
        (0, [1], [], {1: 10000}),
        (100, [], [2, 3], {2: 5000, 3: 5000}),
    ],
)
def test_split_weights_gives_the_candidate_its_share_and_keeps_the_total(
    share, live, candidate, expected
):
    weights = split_weights(share, live, candidate)

    assert weights == expected
    assert sum(weights.values()) == WEIGHT_TOTAL
    assert sum(weights[b] for b in candidate) == round(share * 100 + 1e-9)


@pytest.mark.parametrize("share", [0.0, 0.01, 1, 7.77, 10, 25, 33.3, 50, 66.67, 90, 99.99, 100])
@pytest.mark.parametrize(("n_live", "n_candidate"), [(1, 1), (1, 3), (3, 1), (2, 5), (7, 3)])
def test_split_weights_total_holds_over_a_matrix(share, n_live, n_candidate):
    live = list(range(1, n_live + 1))
    candidate = list(range(100, 100 + n_candidate))

    weights = split_weights(share, live, candidate)

    assert sum(weights.values()) == WEIGHT_TOTAL
    candidate_part = sum(weights[b] for b in candidate)
    assert abs(candidate_part - share * 100) <= 0.5
    # Even within a side: no two backends of a side differ by more than one unit.
    for side in (live, candidate):
        assert max(weights[b] for b in side) - min(weights[b] for b in side) <= 1


@pytest.mark.parametrize(
    ("share", "live", "candidate", "message"),
    [
        (-1, [1], [2], "between 0 and 100"),
        (100.5, [1], [2], "between 0 and 100"),
        (float("nan"), [1], [2], "between 0 and 100"),
        (10, [1], [], "candidate side, which has no backend"),
        (90, [], [2], "live side, which has no backend"),
        (10, [1], [1], "listed twice"),
    ],
)
def test_split_weights_refuses_what_no_one_could_serve(share, live, candidate, message):
    with pytest.raises(ValueError, match=message):
        split_weights(share, live, candidate)
