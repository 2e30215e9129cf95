"""The running gateway against the config the ledger renders: pure, dicts in, differences out.

The running side is LiteLLM's ``GET /model/info`` answer (``model_info_v1`` in
``litellm/proxy/proxy_server.py``, 1.108.7): one entry per deployment of the router's
``model_list``, with ``model_name``, ``litellm_params`` as the file set them (the key
dropped: ``remove_sensitive_info_from_deployment``; LiteLLM adds a few flags of its own,
``use_in_pass_through`` and the like) and ``model_info`` *merged* with what LiteLLM knows
of the model (``_enrich_model_info_with_litellm_data``: its cost map, and the backend's
own ``max_model_len`` read at start-up, so ``max_input_tokens`` and ``max_output_tokens``
are filled in where the file set none).

So only what the ledger renders is compared:

- deployments, by ``model_info.id`` (``<slug>-backend-<id>``), for every service the
  ledger routes: one rendered and not served is *missing*, one served under a routed
  service's name and not rendered is *extra*;
- on each deployment the ``litellm_params`` the renderer writes (``PARAMS``), both ways: a
  value on one side and not the other is a difference, since LiteLLM reports these as the
  file set them and fills none of them in;
- the ``model_info`` limits (``INFO``) only where the ledger sets them: LiteLLM fills
  those in itself.

Not compared: the key (never reported), ``router_settings`` (fallbacks, routing strategy,
pre-call checks: ``/model/info`` does not report them), the tenants (in LiteLLM's
database), and deployments of model names the ledger does not route.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any, TypedDict

# The litellm_params render_config writes (the key aside), in the order a finding lists them.
PARAMS = (
    "model",
    "api_base",
    "weight",
    "rpm",
    "tpm",
    "timeout",
    "stream_timeout",
    "max_parallel_requests",
    "num_retries",
)
# The model_info values render_config writes besides the id; LiteLLM fills them in too.
INFO = ("max_input_tokens", "max_output_tokens", "allowed_fails", "cooldown_time")
# ``what`` of a deployment rendered and not served, or served and not rendered.
DEPLOYMENT = "deployment"
MODEL_NAME = "model_name"


class Difference(TypedDict):
    """One disagreement: ``what`` differs on ``deployment``; ``ledger`` is what the
    rendered config says and ``gateway`` what the gateway reports (None: not set, or for
    ``what == "deployment"`` not there; then the other side holds the weight)."""

    deployment: str
    what: str
    ledger: Any
    gateway: Any


def _same(ledger: Any, gateway: Any) -> bool:
    # 60 and 60.0 are the same timeout: LiteLLM reports floats where the file had ints.
    if isinstance(ledger, bool) or isinstance(gateway, bool):
        return ledger == gateway
    if isinstance(ledger, int | float) and isinstance(gateway, int | float):
        return float(ledger) == float(gateway)
    return ledger == gateway


def _deployment(deployment_id: str, entry: Mapping[str, Any], other: Mapping[str, Any]):
    """The differences of one deployment the ledger renders (``entry``) and the gateway
    serves (``other``)."""
    found: list[Difference] = []
    if entry.get("model_name") != other.get("model_name"):
        found.append(
            Difference(
                deployment=deployment_id,
                what=MODEL_NAME,
                ledger=entry.get("model_name"),
                gateway=other.get("model_name"),
            )
        )
    ours, theirs = entry.get("litellm_params") or {}, other.get("litellm_params") or {}
    for name in PARAMS:
        if not _same(ours.get(name), theirs.get(name)):
            found.append(
                Difference(
                    deployment=deployment_id,
                    what=name,
                    ledger=ours.get(name),
                    gateway=theirs.get(name),
                )
            )
    ours, theirs = entry.get("model_info") or {}, other.get("model_info") or {}
    for name in INFO:
        if ours.get(name) is not None and not _same(ours[name], theirs.get(name)):
            found.append(
                Difference(
                    deployment=deployment_id, what=name, ledger=ours[name], gateway=theirs.get(name)
                )
            )
    return found


def compare(
    rendered: Mapping[str, Any], running: Iterable[Mapping[str, Any]], routed: Iterable[str]
) -> dict[str, list[Difference]]:
    """The differences of each routed service (slug → list; a service in sync has none).

    ``rendered``: ``render_config``'s dict; ``running``: the ``data`` of ``/model/info``;
    ``routed``: every service the ledger routes, the ones it renders no deployment for
    (all their backends disabled) included, so a deployment the gateway still serves for
    one of them is found.
    """
    routed_slugs = set(routed)
    served: dict[str, Mapping[str, Any]] = {}
    for entry in running:
        deployment_id = (entry.get("model_info") or {}).get("id")
        if isinstance(deployment_id, str):
            served[deployment_id] = entry
    found: dict[str, list[Difference]] = defaultdict(list)
    expected_ids = set()
    for entry in rendered.get("model_list") or []:
        slug, deployment_id = entry["model_name"], entry["model_info"]["id"]
        expected_ids.add(deployment_id)
        other = served.get(deployment_id)
        if other is None:
            found[slug].append(
                Difference(
                    deployment=deployment_id,
                    what=DEPLOYMENT,
                    ledger=entry["litellm_params"].get("weight"),
                    gateway=None,
                )
            )
        else:
            found[slug] += _deployment(deployment_id, entry, other)
    for deployment_id, other in served.items():
        slug = other.get("model_name")
        if deployment_id in expected_ids or slug not in routed_slugs:
            continue
        found[str(slug)].append(
            Difference(
                deployment=deployment_id,
                what=DEPLOYMENT,
                ledger=None,
                gateway=(other.get("litellm_params") or {}).get("weight"),
            )
        )
    return {slug: found.get(slug, []) for slug in sorted(routed_slugs)}


def not_routed(running: Iterable[Mapping[str, Any]], routed: Iterable[str]) -> list[str]:
    """The model names the gateway serves that the ledger does not route (not compared)."""
    routed_slugs = set(routed)
    return sorted(
        {
            str(entry.get("model_name"))
            for entry in running
            if entry.get("model_name") not in routed_slugs
        }
    )
