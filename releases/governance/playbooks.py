"""What an on-call engineer checks first, and does next, for each failure mode; and what
each kind of task may do when a service degrades. The defaults live here, in one
readable place, per tier; a service's own overrides are stored as rows and read through
`releases.governance.queries.incident`.

Diagnosis steps go from the outside in (gateway, routing, engine, the request itself);
recovery actions from the least to the most disruptive, rollback last.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from django.utils.translation import gettext_noop, pgettext_lazy
from django_stubs_ext import StrOrPromise

from ledger.engines import Engine

FailureMode = Literal[
    "slow_first_token",
    "queue_congestion",
    "kv_cache_oom",
    "stream_interruption",
    "structured_output_failure",
    "output_format_drift",
    "node_restart",
    "circuit_open",
]

FAILURE_MODES: dict[FailureMode, str] = {
    "slow_first_token": "Slow first token",
    "queue_congestion": "Queue congestion",
    "kv_cache_oom": "KV-cache out of memory",
    "stream_interruption": "Stream interruption",
    "structured_output_failure": "Structured-output failure",
    "output_format_drift": "Output format drift",
    "node_restart": "Node restart",
    "circuit_open": "Gateway circuit breaker open",
}

# The same titles as a page shows them, in the reader's language. FAILURE_MODES stays
# English: the incident API returns it and the rollback form's symptom is stored as a mode.
FAILURE_MODE_TITLES: dict[str, StrOrPromise] = {
    "slow_first_token": pgettext_lazy("failure mode", "Slow first token"),
    "queue_congestion": pgettext_lazy("failure mode", "Queue congestion"),
    "kv_cache_oom": pgettext_lazy("failure mode", "KV-cache out of memory"),
    "stream_interruption": pgettext_lazy("failure mode", "Stream interruption"),
    "structured_output_failure": pgettext_lazy("failure mode", "Structured-output failure"),
    "output_format_drift": pgettext_lazy("failure mode", "Output format drift"),
    "node_restart": pgettext_lazy("failure mode", "Node restart"),
    "circuit_open": pgettext_lazy("failure mode", "Gateway circuit breaker open"),
}


@dataclass(frozen=True)
class Playbook:
    mode: FailureMode
    diagnosis: tuple[str, ...]
    recovery: tuple[str, ...]
    overridden: bool = False  # the service's own, not the default

    @property
    def title(self) -> str:
        return FAILURE_MODES[self.mode]


@dataclass(frozen=True)
class CacheFlush:
    """How an engine's server empties its prefix (KV) cache without a restart."""

    call: str  # method and path on the engine's own server
    caveat: str  # when it answers (English; translated where a page shows it)


# From the engines' source: vLLM registers its endpoint only with VLLM_SERVER_DEV_MODE=1
# (its development routes, off in a production server); SGLang's refuses while it runs
# requests. Every other engine: a restart of the replica is what empties the cache.
PREFIX_CACHE_FLUSH: dict[str, CacheFlush] = {
    Engine.VLLM: CacheFlush(
        "POST /reset_prefix_cache",
        gettext_noop(
            "registered only when the server runs with VLLM_SERVER_DEV_MODE=1, a "
            "development endpoint"
        ),
    ),
    Engine.SGLANG: CacheFlush(
        "POST /flush_cache",
        gettext_noop("GET works too; it answers 400 while requests are running"),
    ),
}


def prefix_cache_flush(engine: str) -> CacheFlush | None:
    """The engine's flush call, or None when none is known (restart the replica)."""
    return PREFIX_CACHE_FLUSH.get(engine)


def _flush_calls() -> str:
    known = "; ".join(
        f"{Engine(engine).label}: {flush.call}, {flush.caveat}"
        for engine, flush in PREFIX_CACHE_FLUSH.items()
    )
    return f"{known}; other engines: no flush call is known, restart the replica"


_ROLL_BACK = (
    "Roll back to the rollback target (Record rollback on this screen); then flush the "
    f"gateway's response cache and the engine's prefix cache ({_flush_calls()}), and "
    "answer the cache questions on the rollback's page."
)

DEFAULT_PLAYBOOKS: dict[FailureMode, Playbook] = {
    "slow_first_token": Playbook(
        "slow_first_token",
        diagnosis=(
            "Gateway queue: requests waiting before they reach the model (gateway queue depth, wait time).",
            "Model routing: is traffic going to the pool and revision you expect?",
            "Engine queue and prefill time: running vs waiting requests, prefill latency (vllm:num_requests_waiting, time to first token histogram).",
            "Context length, prefix-cache hit rate and KV-cache use: long prompts or a cold prefix cache inflate prefill.",
        ),
        recovery=(
            "Rate-limit the noisiest tenant or move low-priority work to the async queue.",
            "Shorten the context (trim history, fewer retrieved passages) or move long requests to the high-memory pool.",
            _ROLL_BACK,
        ),
    ),
    "queue_congestion": Playbook(
        "queue_congestion",
        diagnosis=(
            "Gateway queue depth and rejected requests per tenant.",
            "Engine waiting vs running requests and max concurrency against the declared capability.",
            "Throughput per GPU against the load-test evidence: is a replica down or slower?",
        ),
        recovery=(
            "Rate-limit or move batch and summarisation traffic to the async queue.",
            "Add replicas or shift traffic to a spare pool.",
            _ROLL_BACK,
        ),
    ),
    "kv_cache_oom": Playbook(
        "kv_cache_oom",
        diagnosis=(
            "KV-cache usage (vllm:kv_cache_usage_perc) and preemptions over the last hour.",
            "Request context lengths: a tenant sending prompts near max_model_len?",
            "Launch parameters: gpu_memory_utilization, max_num_seqs, max_model_len against the revision's evidence.",
        ),
        recovery=(
            "Cap the context length at the gateway for the offending tenant.",
            "Move long-context requests to the high-memory pool.",
            _ROLL_BACK,
        ),
    ),
    "stream_interruption": Playbook(
        "stream_interruption",
        diagnosis=(
            "Proxy and load-balancer timeouts (idle and total) on the streaming path.",
            "Client disconnects: are clients closing early (timeouts in the caller)?",
            "Gateway retries: a retry after a partial stream duplicates or cuts output.",
            "Engine error codes and aborted requests in the engine's log.",
        ),
        recovery=(
            "Raise the proxy's idle timeout for the streaming route.",
            "Fall back to non-streaming responses for the affected callers.",
            _ROLL_BACK,
        ),
    ),
    "structured_output_failure": Playbook(
        "structured_output_failure",
        diagnosis=(
            "Free generation or guided decoding: is the request asking for json_schema / grammar mode at all?",
            "Guided-decoding configuration of the engine (backend, strictness) against the revision's capability.",
            "Schema version: did the caller's schema change?",
            "Downstream tool validation: which field fails, and since which release?",
        ),
        recovery=(
            "Switch the guided-decoding configuration, or route to the high-precision backend.",
            "Send affected requests to human review rather than passing invalid output on.",
            _ROLL_BACK,
        ),
    ),
    "output_format_drift": Playbook(
        "output_format_drift",
        diagnosis=(
            "Compare the live revision's chat template and tokenizer digests with the last release (the diff on the release page).",
            "Replay the service's sample sets against the live backend and read the failed checks.",
            "Default sampling parameters: did temperature or stop sequences change?",
        ),
        recovery=(
            "Pin the sampling defaults at the gateway for the affected callers.",
            _ROLL_BACK,
        ),
    ),
    "node_restart": Playbook(
        "node_restart",
        diagnosis=(
            "Which node restarted, and why (OOM kill, GPU Xid error, eviction)?",
            "Did the engine come back with the same image digest and launch parameters (a probe shows drift)?",
            "Warm-up: cold prefix cache and model load time after the restart.",
        ),
        recovery=(
            "Drain the node and shift its traffic to healthy replicas.",
            "Restart with the registered image and parameters if the probe found drift.",
            _ROLL_BACK,
        ),
    ),
    # LiteLLM's router: a deployment failing more than `allowed_fails` times in a minute
    # is cooled down for `cooldown_time`; with every deployment of a model cooling down,
    # callers get 429 "No deployments available for selected model".
    "circuit_open": Playbook(
        "circuit_open",
        diagnosis=(
            'Gateway: which deployments are cooled down (litellm_deployment_cooled_down_total by exception_status; litellm_deployment_state 1 = partial, 2 = complete outage). Callers get 429 "No deployments available for selected model" while every deployment of the model cools down.',
            "What tripped it: the cooldowns' exception status (engine 5xx and timeouts, or the engine's own 429) against the engine's error log and the probe.",
            "The breaker's settings in the gateway policy in force (retries: allowed_fails, cooldown_s): a threshold too tight trips on one bad minute.",
            "The engine behind it: health, waiting requests and KV-cache use. A cooled-down deployment is often an overloaded one.",
        ),
        recovery=(
            "Fix or restart the failing replica; the breaker closes by itself after cooldown_s.",
            "Shift the model's traffic to a healthy pool or to the policy's fallback, degrading per task type (never silently for sql and tool-use).",
            "Change allowed_fails or cooldown_s through a gateway policy release, not by hand on the gateway.",
            _ROLL_BACK,
        ),
    ),
}

# Which failure modes an incident screen offers first, per tier; every mode stays reachable.
TIER_FIRST_MODES: dict[str, tuple[FailureMode, ...]] = {
    "production": ("slow_first_token", "stream_interruption", "structured_output_failure"),
    "internal": ("slow_first_token", "queue_congestion"),
    "experimental": ("node_restart",),
}


@dataclass(frozen=True)
class Degradation:
    may_degrade: bool
    how: str
    overridden: bool = False


# What a kind of task may do when the service degrades. Tasks that act on money,
# contracts or tools never degrade silently: they stop with an explainable error or go
# to a person.
DEFAULT_DEGRADATION: dict[str, Degradation] = {
    "summarization": Degradation(True, "move to the async queue; results arrive later"),
    "translation": Degradation(True, "move to the async queue; results arrive later"),
    "chat": Degradation(True, "answer from the smaller fallback model, marked as degraded"),
    "rag": Degradation(True, "knowledge Q&A goes to the smaller or external fallback model"),
    "code-review": Degradation(True, "move to the async queue"),
    "sql": Degradation(False, "DataAgent stops with an explainable error; no silent fallback"),
    "tool-use": Degradation(False, "high-risk tool calls stop or go to human review"),
    "finance": Degradation(False, "stop with an explainable error or go to human review"),
    "contracts": Degradation(False, "stop with an explainable error or go to human review"),
}
UNKNOWN_TASK_DEGRADATION = Degradation(
    False, "no degradation policy recorded: stop with an explainable error"
)


def playbooks_for(tier: str, own: Mapping[str, Any] | None = None) -> list[Playbook]:
    """Every playbook, the tier's first modes first; a service's own (its runbook's
    `playbooks`: mode → {"diagnosis", "recovery"}) in place of the default."""
    first = TIER_FIRST_MODES.get(tier, ())
    rest = [mode for mode in DEFAULT_PLAYBOOKS if mode not in first]
    found = []
    for mode in (*first, *rest):
        entry = (own or {}).get(mode)
        if isinstance(entry, dict):
            diagnosis, recovery = entry.get("diagnosis") or [], entry.get("recovery") or []
            found.append(Playbook(mode, tuple(diagnosis), tuple(recovery), overridden=True))
        else:
            found.append(DEFAULT_PLAYBOOKS[mode])
    return found


def degradation_for(task_type: str, own: Mapping[str, Any] | None = None) -> Degradation:
    """What a task type may do when the service degrades: the service's own policy (its
    runbook's `degradation`: task type → {"may_degrade", "how"}), else the default."""
    entry = (own or {}).get(task_type)
    if isinstance(entry, dict):
        return Degradation(bool(entry.get("may_degrade")), str(entry.get("how", "")), True)
    return DEFAULT_DEGRADATION.get(task_type, UNKNOWN_TASK_DEGRADATION)


def never_degrading(task_types: Iterable[str]) -> list[str]:
    """Those of `task_types` that must never degrade silently by default (money,
    contracts, tools): a release touching one is a step riskier (`policy.suggested_risk`)."""
    return [
        task_type
        for task_type in task_types
        if task_type in DEFAULT_DEGRADATION and not DEFAULT_DEGRADATION[task_type].may_degrade
    ]
