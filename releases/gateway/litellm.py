"""A service's gateway policy and deployments, rendered as a LiteLLM proxy config.

Pure: plain frozen dataclasses in, plain dicts and YAML out; no database, no Django.
The code that reads the ledger (backends of the live revision and of a rolling-out
candidate, the stage's traffic share) builds ``ServiceRoute`` values and calls
``render_config``; ``docs/gateway.md`` has the same mapping as a table.

Every name below was read in LiteLLM 1.108.7 (the version ``requirements-gateway.txt``
pins), in its installed source (paths under ``litellm/``) and its documentation:

- ``model_list[].model_name`` is the service slug: callers send ``"model": "<slug>"``
  and the router picks among the deployments of that model group (docs
  ``proxy/configs``, ``proxy/load_balancing``).
- ``litellm_params.model = "openai/<served model>"``: the OpenAI-compatible provider
  (docs ``providers/openai_compatible``). That provider's client *requires* an API key,
  so a keyless backend gets ``os.environ/KEYLESS_API_KEY_ENV`` (any value works; the
  backend ignores it). ``api_key`` is always ``os.environ/NAME``: the proxy resolves it
  when it loads the file (``litellm/secret_managers/main.py``, ``get_secret``), so no
  credential is ever in the rendered text.
- ``litellm_params.weight``: ``simple-shuffle`` picks with ``random.choices`` weighted
  by ``weight`` (``litellm/router_strategy/simple_shuffle.py``). When every healthy
  deployment's weight is 0 it falls through to ``rpm``, ``tpm`` and then a uniform
  ``random.choice``: a weight-0 deployment listed beside live ones that are all cooling
  down *would* get traffic. So a deployment whose weight is 0 (an aborted candidate,
  the live side at 100 %) is left out of ``model_list``, never listed with weight 0.
- ``litellm_params.timeout`` / ``stream_timeout`` (``LiteLLM_Params`` in
  ``litellm/types/router.py``) ← ``limits.timeout_s`` / ``limits.stream_timeout_s``.
- ``litellm_params.max_parallel_requests`` ← ``limits.max_parallel_requests``: a
  per-deployment slot count, a 429 when full (``MaxParallelRequestsLimit`` in
  ``litellm/router_utils/client_initalization_utils.py``). LiteLLM has no per-model-group
  concurrency, so the policy's limit holds for each backend of the service.
- ``litellm_params.rpm`` / ``tpm``: per-*deployment* limits (the pre-call check drops a
  deployment at its rpm, ``Router._pre_call_checks``; ``calculate_max_parallel_requests``
  in ``litellm/utils.py`` derives a slot count from them). They are a backend's capacity,
  not a tenant quota, so they come from ``Deployment.rpm``/``tpm`` when the caller knows
  them; a tenant's rpm/tpm is a team limit (``team_requests``).
- ``model_info.id`` = ``<slug>-backend-<id>``: stable, so ``/model/info`` can be compared
  with what the ledger rendered. ``model_info.max_input_tokens`` is what
  ``enable_pre_call_checks`` compares the request's token count with
  (``Router._deployment_max_input_tokens`` and ``_pre_call_checks``): an over-long
  request gets 400 ``ContextWindowExceededError`` from the proxy itself.
  ``model_info.max_output_tokens`` is published by ``/model/info`` (the router's model
  group info) but LiteLLM does not cut answers with it.
- Retries: ``router_settings`` is one per proxy, so a service's own values go on its
  deployments, where LiteLLM reads them first: ``litellm_params.num_retries``
  (``Router._set_deployment_num_retries_on_exception`` and ``_deployment_num_retries``
  in ``litellm/router.py``), ``model_info.allowed_fails`` and ``model_info.cooldown_time``
  (``_get_deployment_cooldown_policy`` and ``_should_cooldown_deployment`` in
  ``litellm/router_utils/cooldown_handlers.py``; its docstring says ``allowed_fails``
  belongs in ``model_info`` because ``litellm_params`` is copied into the provider call).
- ``router_settings``: ``routing_strategy: simple-shuffle``, ``enable_pre_call_checks``,
  ``fallbacks``, ``context_window_fallbacks`` and ``content_policy_fallbacks``
  (``Router.__init__`` arguments; docs
  ``router/api_reference/configuration``, ``proxy/reliability``), both as LiteLLM's list
  of single-key dicts, ``[{"kb-assistant": ["kb-long"]}]``.
- ``general_settings.master_key = os.environ/LITELLM_MASTER_KEY`` (docs
  ``proxy/configs``).
- ``litellm_settings``, only when asked (``GatewayMetrics``): ``callbacks:
  ["prometheus"]`` makes the proxy serve ``/metrics`` (``PrometheusLogger`` in
  ``litellm/integrations/prometheus.py``, which needs ``prometheus_client`` beside it),
  and ``require_auth_for_metrics_endpoint`` says whether a scrape must send one of the
  proxy's keys (``PrometheusAuthMiddleware``; 1.108.7 requires one when it is unset, so
  it is always written). ``custom_prometheus_metadata_labels`` turns the caller's
  ``metadata.ledger_tenant`` and ``metadata.ledger_task_type`` into the labels
  ``metadata_ledger_tenant`` and ``metadata_ledger_task_type`` of every metric
  (``PrometheusMetricLabels.get_labels`` in ``litellm/types/integrations/prometheus.py``
  adds them; ``get_custom_labels_from_metadata`` reads the request's metadata, no
  database needed), so the gateway's metrics can say a request's task type, which
  LiteLLM itself does not know (``releases/gateway/metrics.py`` reads them). It belongs
  to the whole proxy, so a service's part never has it.

Not rendered, on purpose: ``degradation`` (LiteLLM does not know a request's task type;
the callers apply it), ``egress`` (only the ledger's own backends are ever rendered, so
no external deployment appears), and the tenants, which LiteLLM keeps in its database:
``team_requests`` and ``key_requests`` give the bodies of ``/team/new`` and
``/key/generate`` for whoever applies them.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

import yaml

# What a keyless backend's api_key names: the OpenAI client refuses to call without a key.
KEYLESS_API_KEY_ENV = "GATEWAY_KEYLESS_API_KEY"
MASTER_KEY_ENV = "LITELLM_MASTER_KEY"
# split_weights hands out this many weight units: a share is kept to 0.01 %.
WEIGHT_TOTAL = 10_000
# What callers put in a request's `metadata` to name their tenant and task type, and the
# labels the proxy's metrics carry them in (dots become underscores).
METADATA_KEYS = ("ledger_tenant", "ledger_task_type")
METADATA_LABELS = tuple(f"metadata.{key}" for key in METADATA_KEYS)
# LiteLLM counts spend in USD (its model cost map prices tokens in USD).
BUDGET_CURRENCY = "USD"

_ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")
_FALLBACK_KEYS = {
    "error": "fallbacks",
    "context_window": "context_window_fallbacks",
    "content_policy": "content_policy_fallbacks",
}


class Limits(TypedDict, total=False):
    max_input_tokens: int
    max_output_tokens: int
    timeout_s: float
    stream_timeout_s: float
    max_parallel_requests: int


class Budget(TypedDict):
    amount: float
    currency: str
    period_days: int


class Tenant(TypedDict, total=False):
    name: str
    rpm: int
    tpm: int
    max_parallel_requests: int
    budget: Budget


class Fallback(TypedDict):
    on: str
    to_service: str


class Retries(TypedDict, total=False):
    num_retries: int
    allowed_fails: int
    cooldown_s: float


class GatewayPolicy(TypedDict, total=False):
    """The policy document of issue 29 (any key may be missing)."""

    limits: Limits
    tenants: list[Tenant]
    fallbacks: list[Fallback]
    degradation: dict[str, dict[str, str]]
    retries: Retries
    egress: dict[str, bool]


@dataclass(frozen=True)
class GatewayMetrics:
    """Whether the proxy serves its own ``/metrics``, and to whom."""

    enabled: bool = False
    require_auth: bool = True


@dataclass(frozen=True)
class Deployment:
    """One backend serving a service, with the weight it carries (``split_weights``)."""

    backend_id: int
    api_base: str  # the OpenAI-compatible base, e.g. http://10.0.0.5:8000/v1
    served_model: str  # the name the backend serves (vLLM's --served-model-name)
    api_key_env: str | None  # the NAME of the environment variable holding its key
    weight: int
    rpm: int | None = None  # the backend's own capacity, when known
    tpm: int | None = None


@dataclass(frozen=True)
class ServiceRoute:
    slug: str
    deployments: Sequence[Deployment]
    policy: GatewayPolicy | dict[str, Any] | None


def deployment_id(slug: str, backend_id: int) -> str:
    """``model_info.id``: stable across renders, so the running gateway can be compared."""
    return f"{slug}-backend-{backend_id}"


def _env_ref(name: str | None) -> str:
    name = name or KEYLESS_API_KEY_ENV
    if not _ENV_NAME.fullmatch(name):
        # A value pasted where a variable's name belongs must never reach the file.
        raise ValueError(f"api_key_env: {name!r} is not an environment variable name")
    return f"os.environ/{name}"


def _deployment(slug: str, deployment: Deployment, policy: GatewayPolicy) -> dict[str, Any]:
    limits = policy.get("limits") or {}
    retries = policy.get("retries") or {}
    params: dict[str, Any] = {
        "model": f"openai/{deployment.served_model}",
        "api_base": deployment.api_base,
        "api_key": _env_ref(deployment.api_key_env),
        "weight": deployment.weight,
    }
    for name, value in (("rpm", deployment.rpm), ("tpm", deployment.tpm)):
        if value is not None:
            params[name] = value
    for ours, theirs in (
        ("timeout_s", "timeout"),
        ("stream_timeout_s", "stream_timeout"),
        ("max_parallel_requests", "max_parallel_requests"),
    ):
        if limits.get(ours) is not None:
            params[theirs] = limits[ours]  # type: ignore[literal-required]
    if retries.get("num_retries") is not None:
        params["num_retries"] = retries["num_retries"]
    info: dict[str, Any] = {"id": deployment_id(slug, deployment.backend_id)}
    for name in ("max_input_tokens", "max_output_tokens"):
        if limits.get(name) is not None:
            info[name] = limits[name]  # type: ignore[literal-required]
    if retries.get("allowed_fails") is not None:
        info["allowed_fails"] = retries["allowed_fails"]
    if retries.get("cooldown_s") is not None:
        info["cooldown_time"] = retries["cooldown_s"]
    return {"model_name": slug, "litellm_params": params, "model_info": info}


def _fallbacks(slug: str, policy: GatewayPolicy) -> dict[str, list[str]]:
    """The policy's fallbacks by LiteLLM setting, targets in the policy's order."""
    found: dict[str, list[str]] = {}
    for entry in policy.get("fallbacks") or []:
        setting = _FALLBACK_KEYS.get(entry["on"])
        if setting is None:
            raise ValueError(
                f"{slug}: fallback on {entry['on']!r} is not one of {sorted(_FALLBACK_KEYS)}"
            )
        if entry["to_service"] == slug:
            raise ValueError(f"{slug}: a fallback to itself")
        targets = found.setdefault(setting, [])
        if entry["to_service"] not in targets:
            targets.append(entry["to_service"])
    return found


def render_config(
    routes: Iterable[ServiceRoute], metrics: GatewayMetrics = GatewayMetrics()
) -> dict[str, Any]:
    """One LiteLLM proxy ``config.yaml`` for these services, in a fixed order.

    Services by slug, deployments by backend id, keys in the order written here: the
    same routes give the same dict and, through ``render_yaml``, the same bytes.
    """
    ordered = sorted(routes, key=lambda route: route.slug)
    slugs = [route.slug for route in ordered]
    if len(set(slugs)) != len(slugs):
        raise ValueError("a service is listed twice")
    model_list: list[dict[str, Any]] = []
    fallbacks: dict[str, list[dict[str, list[str]]]] = {
        "fallbacks": [],
        "context_window_fallbacks": [],
        "content_policy_fallbacks": [],
    }
    for route in ordered:
        policy: GatewayPolicy = route.policy or {}  # type: ignore[assignment]
        ids = [deployment.backend_id for deployment in route.deployments]
        if len(set(ids)) != len(ids):
            raise ValueError(f"{route.slug}: a backend is listed twice")
        for deployment in sorted(route.deployments, key=lambda d: d.backend_id):
            if deployment.weight < 0:
                raise ValueError(
                    f"{route.slug}: backend {deployment.backend_id} has a negative weight"
                )
            if deployment.weight == 0:
                continue  # see the module docstring: simple-shuffle could still pick it
            model_list.append(_deployment(route.slug, deployment, policy))
        for setting, targets in _fallbacks(route.slug, policy).items():
            fallbacks[setting].append({route.slug: targets})
    return {
        "model_list": model_list,
        "router_settings": {
            "routing_strategy": "simple-shuffle",
            "enable_pre_call_checks": True,
            **fallbacks,
        },
        "general_settings": {"master_key": f"os.environ/{MASTER_KEY_ENV}"},
        **_litellm_settings(metrics),
    }


def _litellm_settings(metrics: GatewayMetrics) -> dict[str, Any]:
    if not metrics.enabled:
        return {}
    return {
        "litellm_settings": {
            "callbacks": ["prometheus"],
            "require_auth_for_metrics_endpoint": metrics.require_auth,
            "custom_prometheus_metadata_labels": list(METADATA_LABELS),
        }
    }


# libyaml's emitter when PyYAML was built with it: the same text as the pure-Python one
# (the representer is the same; tests/releases/gateway/test_litellm_render.py compares
# them), six times faster: 2,000 services took 1.5 s in pure Python (bench/gateway_render.py).
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def render_yaml(config: dict[str, Any]) -> str:
    """The config as the text the proxy reads (``litellm --config``), keys in render order."""
    return yaml.dump(
        config, Dumper=_DUMPER, sort_keys=False, default_flow_style=False, allow_unicode=True
    )


def config_sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def team_id(slug: str, tenant: str) -> str:
    """The LiteLLM team of one tenant of one service (a tenant's quota is per service)."""
    return f"{slug}--{tenant}"


def team_requests(route: ServiceRoute) -> list[dict[str, Any]]:
    """One ``/team/new`` body per tenant: the quotas LiteLLM keeps in its own database.

    Field names are ``NewTeamRequest``'s (``litellm/proxy/_types.py``, fields on
    ``TeamBase`` in ``litellm/models/team.py``; described in ``new_team`` of
    ``litellm/proxy/management_endpoints/team_endpoints.py``). That model has no
    ``max_parallel_requests``: LiteLLM limits concurrency per key, see ``key_requests``.
    """
    policy: GatewayPolicy = route.policy or {}  # type: ignore[assignment]
    bodies = []
    for tenant in sorted(policy.get("tenants") or [], key=lambda t: t["name"]):
        body: dict[str, Any] = {
            "team_id": team_id(route.slug, tenant["name"]),
            "team_alias": f"{route.slug}/{tenant['name']}",
            "models": [route.slug],
            "metadata": {"ledger_service": route.slug, "ledger_tenant": tenant["name"]},
        }
        if tenant.get("rpm") is not None:
            body["rpm_limit"] = tenant["rpm"]
        if tenant.get("tpm") is not None:
            body["tpm_limit"] = tenant["tpm"]
        budget = tenant.get("budget")
        if budget is not None:
            if budget["currency"] != BUDGET_CURRENCY:
                raise ValueError(
                    f"{route.slug}/{tenant['name']}: LiteLLM keeps budgets in {BUDGET_CURRENCY}, "
                    f"not {budget['currency']}"
                )
            body["max_budget"] = float(budget["amount"])
            body["budget_duration"] = f"{budget['period_days']}d"  # duration_parser.py: "<n>d"
        bodies.append(body)
    return bodies


def key_requests(route: ServiceRoute) -> list[dict[str, Any]]:
    """One ``/key/generate`` body per tenant that states a concurrency limit.

    ``GenerateKeyRequest`` (``litellm/types/proxy/management_endpoints/key_requests.py``)
    carries ``max_parallel_requests``, which the rate limiter enforces per key
    (``litellm/proxy/hooks/parallel_request_limiter_v3.py``); the key joins the tenant's
    team, so the team's rpm, tpm and budget hold for it too.
    """
    policy: GatewayPolicy = route.policy or {}  # type: ignore[assignment]
    bodies = []
    for tenant in sorted(policy.get("tenants") or [], key=lambda t: t["name"]):
        if tenant.get("max_parallel_requests") is None:
            continue
        bodies.append(
            {
                "team_id": team_id(route.slug, tenant["name"]),
                "key_alias": f"{route.slug}/{tenant['name']}",
                "models": [route.slug],
                "max_parallel_requests": tenant["max_parallel_requests"],
            }
        )
    return bodies


def _spread(total: int, backends: list[int]) -> dict[int, int]:
    """``total`` over the backends as evenly as integers allow: the first
    ``total % n`` (by id) get one more, so the parts add up to ``total`` exactly."""
    share, extra = divmod(total, len(backends))
    return {backend: share + (1 if i < extra else 0) for i, backend in enumerate(sorted(backends))}


def split_weights(share_pct: float, live: list[int], candidate: list[int]) -> dict[int, int]:
    """Integer ``litellm_params.weight`` per backend id for a stage carrying ``share_pct``.

    The candidate's side gets ``round(share_pct * 100)`` of ``WEIGHT_TOTAL`` (10,000)
    units, rounded half up (0.01 % steps), the live side the rest; each side is spread
    evenly over its backends, the remainder one unit each to the lowest ids. So the
    weights always add up to exactly 10,000, and simple-shuffle, which normalises them,
    gives each side its share. 0 % gives every candidate backend 0 and 100 % every live
    one 0 (``render_config`` leaves weight-0 deployments out). A side with units to
    carry and no backend is refused: no one would serve that share.
    """
    if not 0 <= share_pct <= 100 or math.isnan(share_pct):
        raise ValueError(f"share_pct: {share_pct} is not between 0 and 100")
    if (
        set(live) & set(candidate)
        or len(set(live)) != len(live)
        or len(set(candidate)) != len(candidate)
    ):
        raise ValueError("a backend is listed twice")
    candidate_units = math.floor(share_pct * WEIGHT_TOTAL / 100 + 0.5)
    weights: dict[int, int] = {}
    for side, units, name in (
        (live, WEIGHT_TOTAL - candidate_units, "live"),
        (candidate, candidate_units, "candidate"),
    ):
        if not side:
            if units:
                raise ValueError(
                    f"{share_pct} % leaves {units} units to the {name} side, which has no backend"
                )
            continue
        weights.update(_spread(units, side))
    return weights
