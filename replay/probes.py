"""Probing a backend: what it says it serves, and one small request per declared capability.

No Django here but the allow-list (`replay.outbound`). ``get_models`` and
``get_version`` read what a server reports about itself; ``capability_probe`` builds
the request that puts one declared capability to the test and ``judge_capability``
reads its answer; ``find_drift`` compares what was reported with what the ledger
registered. ``replay.services.probe_backend`` runs them
against a backend and records the outcome.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx

from ledger.engines import Engine
from replay.checks import CheckOutcome, judge
from replay.client import ChatRequest, ReplayResult, api_root
from replay.outbound import DestinationPolicy, guarded_client


class ProbeError(Exception):
    """A probe could not read what it asked for; the message never holds the credential."""


@dataclass
class ServedModel:
    id: str
    max_context: int | None  # vLLM/SGLang `max_model_len`; None when not reported
    owned_by: str | None = None
    root: str | None = None


@dataclass
class VersionInfo:
    engine: str | None  # the engine whose endpoint answered
    version: str | None
    endpoint: str | None
    raw: dict[str, Any] = field(default_factory=dict)


_CONTEXT_KEYS = ("max_model_len", "context_length", "context_window", "max_context_length")

# Each engine's version endpoint and the key holding the version.
VERSION_ENDPOINTS: dict[str, tuple[str, str]] = {
    Engine.VLLM: ("/version", "version"),
    Engine.TGI: ("/info", "version"),
    Engine.OLLAMA: ("/api/version", "version"),
    Engine.SGLANG: ("/get_server_info", "version"),
    Engine.LLAMA_CPP: ("/props", "build_info"),
}


def _redact(text: str, secret: str | None) -> str:
    return text.replace(secret, "[redacted]") if secret else text


async def _get_json(client: httpx.AsyncClient, url: str, credential: str | None) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {credential}"} if credential else {}
    try:
        response = await client.get(url, headers=headers)
    except httpx.HTTPError as error:
        message = _redact(f"GET {url}: {type(error).__name__}: {error}", credential)
        raise ProbeError(message) from None
    try:
        return response.status_code, response.json()
    except ValueError:
        return response.status_code, None


async def get_models(
    base_url: str,
    *,
    credential: str | None = None,
    timeout: float = 10.0,
    destinations: DestinationPolicy | None = None,
) -> list[ServedModel]:
    """``GET /v1/models``: the served model ids and their context length where reported."""
    root = api_root(base_url)
    async with guarded_client(timeout=timeout, policy=destinations) as client:
        status, data = await _get_json(client, f"{root}/v1/models", credential)
    if status != 200 or not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise ProbeError(f"GET /v1/models answered HTTP {status} without a model list")
    models = []
    for entry in data["data"]:
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            continue
        context = next((entry[k] for k in _CONTEXT_KEYS if isinstance(entry.get(k), int)), None)
        models.append(ServedModel(entry["id"], context, entry.get("owned_by"), entry.get("root")))
    return models


async def get_version(
    base_url: str,
    engine: str | None = None,
    *,
    credential: str | None = None,
    timeout: float = 10.0,
    destinations: DestinationPolicy | None = None,
) -> VersionInfo:
    """Ask the engine's own version endpoint first, then the other engines' in turn."""
    root = api_root(base_url)
    order = sorted(VERSION_ENDPOINTS, key=lambda name: name != engine)
    async with guarded_client(timeout=timeout, policy=destinations) as client:
        for name in order:
            path, key = VERSION_ENDPOINTS[name]
            try:
                status, data = await _get_json(client, root + path, credential)
            except ProbeError:
                continue
            if status == 200 and isinstance(data, dict) and data.get(key) is not None:
                return VersionInfo(name, str(data[key]), path, data)
    return VersionInfo(None, None, None)


def reported_context(models: list[ServedModel], version: VersionInfo, model: str) -> int | None:
    """The served model's context length: from /v1/models, else from the version endpoint.

    TGI's /info says ``max_total_tokens``, SGLang's /get_server_info ``context_length``,
    llama.cpp's /props ``default_generation_settings.n_ctx``.
    """
    served = next((m for m in models if m.id == model), None)
    if served is not None and served.max_context is not None:
        return served.max_context
    raw = version.raw
    for key in ("max_total_tokens", *_CONTEXT_KEYS):
        if isinstance(raw.get(key), int):
            return raw[key]
    settings = raw.get("default_generation_settings")
    if isinstance(settings, dict) and isinstance(settings.get("n_ctx"), int):
        return settings["n_ctx"]
    return None


# -- drift ----------------------------------------------------------------------------


def _same_version(registered: str, reported: str) -> bool:
    """0.6.3 == v0.6.3; llama.cpp's build b5170 matches a reported b5170-8a1d206f."""
    a, b = registered.strip().lstrip("vV"), reported.strip().lstrip("vV")
    return a == b or (bool(a) and b.startswith(a) and b[len(a)] in "-+ ")


def find_drift(
    *,
    model_name: str,
    context: int,
    engine: str,
    engine_version: str,
    models: list[ServedModel],
    version: VersionInfo,
) -> list[dict[str, Any]]:
    """Where what the server reports disagrees with what the ledger registered.

    ``context`` is the registered maximum context (the runtime's ``max_model_len``
    launch parameter, else the revision's context limit). What a server does not
    report is not drift: unknown is not a disagreement.
    """
    drift: list[dict[str, Any]] = []
    served = [m.id for m in models]
    if model_name not in served:
        drift.append(
            {"what": "served_model", "registered": model_name, "reported": ", ".join(served)}
        )
    reported = reported_context(models, version, model_name)
    if reported is not None and reported != context:
        drift.append({"what": "max_context", "registered": context, "reported": reported})
    if version.engine is not None and version.engine != engine:
        drift.append({"what": "engine", "registered": engine, "reported": version.engine})
    elif version.version is not None and not _same_version(engine_version, version.version):
        drift.append(
            {"what": "engine_version", "registered": engine_version, "reported": version.version}
        )
    return drift


def describe_drift(drift: list[dict[str, Any]]) -> str:
    return "; ".join(
        f"{item['what']}: registered {item['registered']}, reported {item['reported'] or 'none'}"
        for item in drift
    )


# -- capability probes ----------------------------------------------------------------

ORDER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "order_id": {"type": "string"},
        "sku": {"type": "string"},
        "quantity": {"type": "integer", "minimum": 1},
        "city": {"type": "string"},
    },
    "required": ["order_id", "sku", "quantity", "city"],
    "additionalProperties": False,
}
LOOKUP_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "lookup_order",
        "description": "Look up the status of a customer order by its id.",
        "parameters": {
            "type": "object",
            "properties": {"order_id": {"type": "string", "description": "e.g. A-1043"}},
            "required": ["order_id"],
        },
    },
}
# The filler for the long-context probe: ordinary prose, about 1.3 tokens per word
# for the tokenizers of current model families.
_FILLER_TEXT = (
    "The operations team reviewed the nightly batch report and noted that every job "
    "finished within its window, that the queue stayed short, and that no customer "
    "ticket mentioned slow answers during the period under review."
)
_TOKENS_PER_WORD = 1.3
_CONTEXT_SHARE = 0.85  # how near the declared length the prompt goes
_CONTEXT_ANSWER_TOKENS = 8


@dataclass(frozen=True)
class CapabilityProbe:
    """The request that puts one declared capability to the test, and how it is judged."""

    kind: str
    description: str
    request: ChatRequest
    checks: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class CapabilityVerdict:
    passed: bool
    evidence: dict[str, Any]


def _user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def capability_probe(kind: str, value: Any) -> CapabilityProbe | str:
    """The probe for a declared capability, or why this kind/value is not probed."""
    if kind == "structured_output":
        if not isinstance(value, list) or "json_schema" not in value:
            return "only the json_schema structured-output mode is probed"
        return CapabilityProbe(
            kind,
            "a response_format json_schema request, its output validated against the schema",
            ChatRequest(
                messages=_user(
                    "Extract the order from this message as JSON: 'Hi, this is about order "
                    "A-1043: please ship 3 units of SKU KB-220 to our Lyon office.'"
                ),
                params={"temperature": 0, "max_tokens": 200},
                response_format={
                    "type": "json_schema",
                    "json_schema": {"name": "order", "strict": True, "schema": ORDER_SCHEMA},
                },
            ),
            [{"type": "json_schema", "schema": ORDER_SCHEMA}],
        )
    if kind == "tool_calling":
        if value is not True:
            return "tool calling is not declared"
        return CapabilityProbe(
            kind,
            "a request offering one tool, expecting a call with arguments valid against its schema",
            ChatRequest(
                messages=_user("Where is my order A-1043? Use the lookup tool."),
                params={"temperature": 0, "max_tokens": 128},
                tools=[LOOKUP_TOOL],
                tool_choice="auto",
            ),
            [
                {
                    "type": "tool_call",
                    "name": "lookup_order",
                    "arguments_schema": LOOKUP_TOOL["function"]["parameters"],
                }
            ],
        )
    if kind == "streaming":
        if value != "sse":
            return f"only the sse streaming protocol is probed (declared {value!r})"
        return CapabilityProbe(
            kind,
            "a streamed request that must finish with a finish_reason",
            ChatRequest(messages=_user("Count from 1 to 5."), params={"max_tokens": 32}),
        )
    if kind == "context_length":
        if not isinstance(value, int) or value < 64:
            return f"a context length of {value!r} is too small to probe"
        words = int(value * _CONTEXT_SHARE / _TOKENS_PER_WORD)
        filler_words = _FILLER_TEXT.split(" ")
        filler = " ".join(filler_words[i % len(filler_words)] for i in range(words))
        return CapabilityProbe(
            kind,
            f"a prompt of about {int(value * _CONTEXT_SHARE)} tokens "
            f"({_CONTEXT_SHARE:.0%} of the declared {value})",
            ChatRequest(
                messages=_user(f"{filler}\n\nReply with the single word OK."),
                params={"temperature": 0, "max_tokens": _CONTEXT_ANSWER_TOKENS},
            ),
        )
    return f"{kind} is not probed by a request"


def _snippet(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"


def judge_capability(probe: CapabilityProbe, result: ReplayResult) -> CapabilityVerdict:
    """Passed when the request completed and every check of the probe held."""
    judged, outcomes = judge(result, probe.checks)
    evidence: dict[str, Any] = {
        "probe": probe.description,
        "outcome": "ok" if judged.ok else judged.error_code,
        "finish_reason": judged.finish_reason,
        "ttft_ms": _round(judged.ttft_ms),
        "prompt_tokens": judged.prompt_tokens,
        "output_tokens": judged.output_tokens,
    }
    if judged.error_detail:
        evidence["error_detail"] = judged.error_detail
    if outcomes:
        evidence["checks"] = [_outcome(o) for o in outcomes]
    if judged.output_text:
        evidence["output"] = _snippet(judged.output_text)
    if judged.tool_calls:
        evidence["tool_calls"] = [
            {"name": c.name, "arguments": _snippet(c.arguments)} for c in judged.tool_calls
        ]
    if judged.served_model:
        evidence["served_model"] = judged.served_model
    return CapabilityVerdict(judged.ok, evidence)


def _outcome(outcome: CheckOutcome) -> dict[str, Any]:
    return {k: v for k, v in outcome.to_dict().items() if v != ""}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)
