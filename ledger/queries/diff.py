"""What changes from one revision of a service to another, and which changes break callers.

The release page shows the candidate against the live revision; the rollback
target check reads live against the target (what rolling back would change).
Both ask `revision_diff(from_revision, to_revision)`.

What breaks callers (`RULES` below says it field by field, with the words shown):

| breaks when                      | fields                                                 |
|----------------------------------|--------------------------------------------------------|
| it changes                       | `tokenizer_id` `tokenizer_digest` `chat_template_digest` |
|                                  | `generation_config_digest` (default sampling)          |
|                                  | `launch_parameters.chat_template` `launch_parameters.chat_format` |
|                                  | `launch_parameters.guided_decoding_backend` `launch_parameters.grammar_backend` |
|                                  | `launch_parameters.served_model_name`                  |
| it changes or is unset           | `launch_parameters.tool_call_parser` `launch_parameters.reasoning_parser` |
| it gets smaller                  | `context_limit` `capabilities.context_length` `capabilities.max_concurrency` |
|                                  | each engine's context, prompt and concurrency flag: `launch_parameters.max_model_len` |
|                                  | `launch_parameters.max_num_seqs` (vLLM), `launch_parameters.context_length` (SGLang), … |
| true becomes false or unset      | `capabilities.tool_calling` `launch_parameters.enable_auto_tool_choice` |
| a mode is dropped (or all)       | `capabilities.structured_output`                       |
| the protocol changes or is unset | `capabilities.streaming` (unless it was "none")         |
| a limit or quota is lowered, a tenant, fallback or degradation dropped, egress opened | the gateway policy's parts (see ledger/queries/policy_diff.py) |

Everything else that differs is listed as a plain change with a short note or
none: the asset's name, family, quantization, weights and config.json; the
engine, its version, the image and its digest, the hardware, the CUDA and GPU
driver versions; the gateway
policy; launch parameters without a rule (gpu_memory_utilization, …); the
other capabilities. The launch parameters the seed's table 6-3 names as risky to
change say why in their note: prefix caching (`enable_prefix_caching`,
`disable_radix_cache`), the KV-cache type, the engine's quantization flag, and
speculative decoding (`speculative_config`, `speculative_algorithm`, `speculate`,
`draft_model`, …) turned on, off or changed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypedDict

from ledger.models import Capability, GatewayPolicy, Revision
from ledger.queries.policy_diff import policy_changes

# `from` is a Python keyword, hence the functional form; the API returns this shape as is.
Change = TypedDict("Change", {"field": str, "from": Any, "to": Any, "breaking": bool, "why": str})


# ---------------------------------------------------------------- when a change breaks
# Each takes the from- and to-value (None: unset or not declared); they are only
# asked about values that differ.


def always(old: Any, new: Any) -> bool:
    return True


def never(old: Any, new: Any) -> bool:
    return False


def unless_added(old: Any, new: Any) -> bool:
    """Changed or removed breaks; set where it was unset does not (a parser gained)."""
    return old is not None


def when_lowered(old: Any, new: Any) -> bool:
    return _is_number(old) and _is_number(new) and new < old


def when_turned_off(old: Any, new: Any) -> bool:
    return old is True and new is not True


def when_modes_dropped(old: Any, new: Any) -> bool:
    return bool(_dropped(old, new))


def unless_from_none(old: Any, new: Any) -> bool:
    """A streaming protocol changed or withdrawn breaks its readers; there were none
    when it did not stream."""
    return old not in (None, "none")


@dataclass(frozen=True)
class Rule:
    breaks: Callable[[Any, Any], bool] = never
    # Said when it breaks. {from} {to} {flag} {added} {dropped} are filled in.
    why: str = ""
    # Said when it changes without breaking: from one value to another, newly set, unset.
    note: str = ""
    added: str = ""
    removed: str = ""


CONTEXT_FLAG_RULE = Rule(
    when_lowered,
    "{flag} drops from {from} to {to} tokens: the engine refuses requests longer than {to} tokens",
    note="{flag} rises from {from} to {to} tokens",
)
PROMPT_FLAG_RULE = Rule(
    when_lowered,
    "{flag} drops from {from} to {to} tokens: prompts longer than {to} tokens are refused",
    note="{flag} rises from {from} to {to} tokens",
)
CONCURRENCY_FLAG_RULE = Rule(
    when_lowered,
    "{flag} drops from {from} to {to}: at most {to} requests run at once, the rest queue, "
    "so latency rises and the gateway may answer 429 under load",
    note="{flag} rises from {from} to {to}",
)
TEMPLATE_FLAG_RULE = Rule(
    always,
    "the chat template override ({flag}) changes from {from} to {to}: prompts are "
    "rendered differently, so answers, stop behaviour and tool-call formatting may change",
)
GRAMMAR_BACKEND_RULE = Rule(
    always,
    "the structured-output backend ({flag}) changes from {from} to {to}: backends support "
    "different JSON-schema, regex and grammar features, so constrained requests may be "
    "refused or shaped differently",
)
PREFIX_CACHE_RULE = Rule(
    note="prefix caching ({flag}) goes from {from} to {to}: time to first token on "
    "repeated prefixes changes, and a prefix cache outlives a rollback unless flushed",
    added="{flag} is now set to {to}: time to first token on repeated prefixes changes",
    removed="{flag} is no longer set: the engine's default prefix caching applies",
)
KV_CACHE_DTYPE_RULE = Rule(
    note="the KV cache is stored as {to}, was {from}: a smaller type holds more tokens "
    "and can shift answers; replay the quality sets and load-test again",
    added="the KV cache is now stored as {to}: a smaller type holds more tokens and can "
    "shift answers; replay the quality sets and load-test again",
    removed="the KV cache type is no longer set: the engine's default applies",
)
QUANTIZATION_FLAG_RULE = Rule(
    note="the engine quantizes the weights as {to}, was {from}: answer quality and "
    "structured output may shift; replay every required set and load-test again",
    added="the engine now quantizes the weights as {to}: answer quality and structured "
    "output may shift; replay every required set and load-test again",
    removed="the engine no longer quantizes the weights ({from} before): memory use and "
    "latency change; load-test again",
)
SPECULATIVE_RULE = Rule(
    note="speculative decoding changes ({flag}: {from} to {to}): latency under load "
    "follows the draft's acceptance rate; load-test at the planned concurrency again",
    added="speculative decoding is turned on ({flag}: {to}): latency under load follows "
    "the draft's acceptance rate, and gains shrink at high concurrency; load-test again",
    removed="speculative decoding is turned off ({flag} was {from}): single-request "
    "latency rises; load-test again",
)
UNSET = "unset"
NOT_DECLARED = "not declared"

# Field names are those the diff reports (and the API returns). Launch-parameter
# names mean the same on every engine that has them (max_batch_size: LMDeploy,
# TensorRT-LLM).
RULES: dict[str, Rule] = {
    # ---- the model asset
    "model_asset": Rule(
        note="another model artifact serves: answers will differ; compare the replay runs"
    ),
    "family": Rule(note="another model family"),
    "quantization": Rule(note="weights at another precision: answer quality may shift"),
    "weights_digest": Rule(note="other weights"),
    "tokenizer_id": Rule(
        always,
        "the tokenizer changes from {from} to {to}: token counts change, so prompts sized "
        "to the limits, max_tokens budgets and logit biases by token id no longer hold",
    ),
    "tokenizer_digest": Rule(
        always,
        "the tokenizer files change: token counts change, so prompts sized to the limits, "
        "max_tokens budgets and logit biases by token id no longer hold",
    ),
    "chat_template_digest": Rule(
        always,
        "the chat template changes: prompts are rendered differently, so answers, stop "
        "behaviour and tool-call formatting may change",
    ),
    "generation_config_digest": Rule(
        always,
        "default sampling may have changed (generation_config.json differs): requests "
        "that leave temperature, top_p or max_tokens unset get other defaults",
    ),
    "config_digest": Rule(note="config.json differs: architecture or RoPE settings may differ"),
    # ---- the runtime
    "engine": Rule(
        note="another engine serves: its launch flags, parsers and errors differ; read the "
        "launch parameters below by their meaning, not only their names"
    ),
    "engine_version": Rule(note="engine defaults can shift between releases: read its notes"),
    "image": Rule(note="another container image"),
    "image_digest": Rule(
        note="another build of the image runs",
        added="the image is now pinned by digest",
        removed="the image is no longer pinned by digest: what runs may change under its tag",
    ),
    "gpu_model": Rule(note="other hardware: load-test evidence does not carry over"),
    "gpu_count": Rule(note="other hardware: load-test evidence does not carry over"),
    "gpu_memory_gb": Rule(note="other hardware: load-test evidence does not carry over"),
    "cuda_version": Rule(
        note="another CUDA runtime: kernels and numerics may differ; load-test evidence "
        "does not carry over",
        added="the CUDA version is now stated ({to})",
        removed="the CUDA version is no longer stated",
    ),
    "driver_version": Rule(
        note="another GPU driver: kernels and numerics may differ; load-test evidence "
        "does not carry over",
        added="the GPU driver version is now stated ({to})",
        removed="the GPU driver version is no longer stated",
    ),
    # ---- launch parameters that cap what callers may send
    "launch_parameters.max_model_len": CONTEXT_FLAG_RULE,  # vLLM
    "launch_parameters.context_length": CONTEXT_FLAG_RULE,  # SGLang
    "launch_parameters.session_len": CONTEXT_FLAG_RULE,  # LMDeploy
    "launch_parameters.max_total_tokens": CONTEXT_FLAG_RULE,  # TGI
    "launch_parameters.num_ctx": CONTEXT_FLAG_RULE,  # Ollama
    "launch_parameters.n_ctx": CONTEXT_FLAG_RULE,  # llama.cpp
    "launch_parameters.max_seq_len": CONTEXT_FLAG_RULE,  # TensorRT-LLM
    "launch_parameters.max_input_tokens": PROMPT_FLAG_RULE,  # TGI
    "launch_parameters.max_input_len": PROMPT_FLAG_RULE,  # TensorRT-LLM
    "launch_parameters.max_num_seqs": CONCURRENCY_FLAG_RULE,  # vLLM
    "launch_parameters.max_running_requests": CONCURRENCY_FLAG_RULE,  # SGLang
    "launch_parameters.max_batch_size": CONCURRENCY_FLAG_RULE,  # LMDeploy, TensorRT-LLM
    "launch_parameters.max_concurrent_requests": CONCURRENCY_FLAG_RULE,  # TGI
    "launch_parameters.num_parallel": CONCURRENCY_FLAG_RULE,  # Ollama
    "launch_parameters.n_parallel": CONCURRENCY_FLAG_RULE,  # llama.cpp
    # ---- launch parameters that shape outputs callers parse
    "launch_parameters.tool_call_parser": Rule(  # vLLM, SGLang
        unless_added,
        "tool calls were parsed by {from}, now {to}: agents may get malformed or missing "
        "tool calls",
        added="tool calls are now parsed by {to}",
    ),
    "launch_parameters.enable_auto_tool_choice": Rule(  # vLLM
        when_turned_off,
        'automatic tool choice is turned off: requests with tool_choice "auto" are refused',
    ),
    "launch_parameters.reasoning_parser": Rule(  # vLLM, SGLang
        unless_added,
        "reasoning was split out by {from}, now {to}: clients reading reasoning_content may "
        "find it missing or mixed into the answer",
        added="reasoning is now split out by {to}",
    ),
    "launch_parameters.guided_decoding_backend": GRAMMAR_BACKEND_RULE,  # vLLM
    "launch_parameters.grammar_backend": GRAMMAR_BACKEND_RULE,  # SGLang
    "launch_parameters.chat_template": TEMPLATE_FLAG_RULE,  # vLLM, SGLang
    "launch_parameters.chat_format": TEMPLATE_FLAG_RULE,  # llama.cpp
    # ---- launch parameters the seed's table 6-3 names as risky to change
    "launch_parameters.enable_prefix_caching": PREFIX_CACHE_RULE,  # vLLM
    "launch_parameters.disable_radix_cache": PREFIX_CACHE_RULE,  # SGLang (inverted)
    "launch_parameters.kv_cache_dtype": KV_CACHE_DTYPE_RULE,  # vLLM, SGLang
    "launch_parameters.quantization": QUANTIZATION_FLAG_RULE,  # vLLM, SGLang
    "launch_parameters.quantize": QUANTIZATION_FLAG_RULE,  # TGI
    "launch_parameters.speculative_config": SPECULATIVE_RULE,  # vLLM
    "launch_parameters.speculative_algorithm": SPECULATIVE_RULE,  # SGLang
    "launch_parameters.speculative_draft_model_path": SPECULATIVE_RULE,  # SGLang
    "launch_parameters.speculative_num_draft_tokens": SPECULATIVE_RULE,  # SGLang
    "launch_parameters.speculate": SPECULATIVE_RULE,  # TGI
    "launch_parameters.draft_model": SPECULATIVE_RULE,  # llama.cpp
    "launch_parameters.served_model_name": Rule(
        always,
        "the served model name changes from {from} to {to}: callers asking for model "
        "{from} get 404 unless the gateway maps it",
    ),
    # ---- the revision
    "context_limit": Rule(
        when_lowered,
        "context window shrinks from {from} to {to} tokens: requests longer than {to} "
        "tokens will be refused",
        note="context window grows from {from} to {to} tokens",
    ),
    "gateway_policy_version": Rule(note="the gateway policy changes from {from} to {to}"),
    # ---- capabilities, as declared (removing one is judged as its value becoming unset)
    "capabilities.context_length": Rule(
        when_lowered,
        "the declared context length shrinks from {from} to {to} tokens: requests longer "
        "than {to} tokens will be refused",
        note="the declared context length grows from {from} to {to} tokens",
    ),
    "capabilities.max_concurrency": Rule(
        when_lowered,
        "the declared max concurrency drops from {from} to {to}: tenants sized for {from} "
        "concurrent requests will queue or be rate limited",
        note="the declared max concurrency rises from {from} to {to}",
    ),
    "capabilities.structured_output": Rule(
        when_modes_dropped,
        "structured output no longer offers {dropped}: requests asking for it will fail",
        note="structured output now also offers {added}",
    ),
    "capabilities.tool_calling": Rule(
        when_turned_off,
        "tool calling is no longer offered: requests with tools get no tool calls back, so "
        "agents that call tools break",
    ),
    "capabilities.streaming": Rule(
        unless_from_none,
        "the streaming protocol changes from {from} to {to}: clients reading a {from} stream break",
    ),
    "capabilities.task_types": Rule(note="verified task types: {added_dropped}"),
    "capabilities.metrics": Rule(note="metrics exposed: {added_dropped}"),
}
PLAIN = Rule()


# ---------------------------------------------------------------- the diff


def revision_diff(
    a: Revision | None,
    b: Revision,
    *,
    capabilities: dict[int, dict[str, Any]] | None = None,
) -> list[Change]:
    """What changes going from revision `a` to revision `b`: breaking changes first,
    then by field; unchanged fields are left out. With no `a` (a service's first
    revision) every part `b` sets is a change from unset, and nothing breaks.

    Reads each revision's model asset and runtime (load them with `with_parts()`)
    and asks one query for the capabilities of both (none when `capabilities`, kind →
    value by revision id, is given: `declared_capabilities` reads them for many at once), and
    one for their gateway policies when they run with different versions not loaded
    yet. Two versions' documents are compared part by part
    (`ledger.queries.policy_diff`): "tenant legal removed: its calls will be refused".
    """
    if a is None:
        return _first_revision(b, capabilities)
    policies = _policies(a, b)
    if capabilities is None:
        capabilities = declared_capabilities([a.pk, b.pk])
    old = _fields(a, capabilities.get(a.pk, {}))
    new = _fields(b, capabilities.get(b.pk, {}))
    changes = [
        _judge(field, old.get(field), new.get(field))
        for field in old.keys() | new.keys()
        if _comparable(old.get(field)) != _comparable(new.get(field))
    ]
    if a.gateway_policy_id != b.gateway_policy_id:
        was, now = policies[a.gateway_policy_id], policies[b.gateway_policy_id]
        assert was is not None and now is not None  # read above when they differ
        changes.append(_judge("gateway_policy_version", was.label, now.label))
        changes.extend(policy_changes(was.document, now.document))
    return sorted(changes, key=lambda change: (not change["breaking"], change["field"]))


def declared_capabilities(revision_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
    """Each revision's declared capabilities, kind → value, in one query."""
    found: dict[int, dict[str, Any]] = {pk: {} for pk in revision_ids}
    if not found:
        return found
    rows = Capability.objects.filter(revision_id__in=found).values_list(
        "revision_id", "kind", "value"
    )
    for revision_id, kind, value in rows:
        found[revision_id][kind] = value
    return found


def _first_revision(b: Revision, capabilities: dict[int, dict[str, Any]] | None) -> list[Change]:
    if capabilities is None:
        capabilities = declared_capabilities([b.pk])
    new = _fields(b, capabilities.get(b.pk, {}))
    changes: list[Change] = [
        {"field": field, "from": None, "to": value, "breaking": False, "why": ""}
        for field, value in new.items()
        if value not in (None, "", [], {})
    ]
    if b.gateway_policy_id is not None:
        changes.append(
            {
                "field": "gateway_policy_version",
                "from": None,
                "to": b.gateway_policy_id,
                "breaking": False,
                "why": "",
            }
        )
    return sorted(changes, key=lambda change: change["field"])


def _policies(a: Revision, b: Revision) -> dict[int, GatewayPolicy | None]:
    """Each side's policy version by id. The same version on both sides is no change and
    needs no read; otherwise what is not loaded is read in one query."""
    field = Revision._meta.get_field("gateway_policy")
    if a.gateway_policy_id == b.gateway_policy_id:
        loaded = next((r for r in (a, b) if field.is_cached(r)), None)
        return {a.gateway_policy_id: loaded.gateway_policy if loaded else None}
    found = {r.gateway_policy_id: r.gateway_policy for r in (a, b) if field.is_cached(r)}
    missing = {a.gateway_policy_id, b.gateway_policy_id} - set(found)
    if missing:
        found.update(GatewayPolicy.objects.in_bulk(missing))
    return dict(found)


def breaking_changes(changes: Iterable[Change]) -> list[Change]:
    return [change for change in changes if change["breaking"]]


def has_breaking(changes: Iterable[Change]) -> bool:
    return any(change["breaking"] for change in changes)


def _fields(revision: Revision, capabilities: dict[str, Any]) -> dict[str, Any]:
    """The revision as flat field: value pairs; empty text counts as unset."""
    asset, runtime = revision.model_asset, revision.runtime
    image, _, _ = runtime.image.partition("@")
    fields: dict[str, Any] = {
        "model_asset": f"{asset.name}@{asset.revision}",
        "family": asset.family,
        "quantization": asset.quantization,
        "weights_digest": asset.weights_digest,
        "tokenizer_id": asset.tokenizer_id or None,
        "tokenizer_digest": asset.tokenizer_digest,
        "chat_template_digest": asset.chat_template_digest,
        "generation_config_digest": asset.generation_config_digest,
        "config_digest": asset.config_digest,
        "engine": runtime.engine,
        "engine_version": runtime.engine_version,
        "image": image,
        "image_digest": runtime.image_digest,
        "gpu_model": runtime.gpu_model or None,
        "gpu_count": runtime.gpu_count,
        "gpu_memory_gb": runtime.gpu_memory_gb,
        "cuda_version": runtime.cuda_version or None,
        "driver_version": runtime.driver_version or None,
        "context_limit": revision.context_limit,
    }
    parameters = runtime.launch_parameters if isinstance(runtime.launch_parameters, dict) else {}
    for key, value in parameters.items():
        fields[f"launch_parameters.{key}"] = value
    for kind, value in capabilities.items():
        fields[f"capabilities.{kind}"] = value
    return fields


def _judge(field: str, old: Any, new: Any) -> Change:
    rule = RULES.get(field, PLAIN)
    breaking = rule.breaks(old, new)
    if breaking:
        why = rule.why
    elif old is None:
        why = rule.added
    elif new is None:
        why = rule.removed or ("no longer declared" if field.startswith("capabilities.") else "")
    else:
        why = rule.note
    return {
        "field": field,
        "from": old,
        "to": new,
        "breaking": breaking,
        "why": _fill(why, field, old, new),
    }


def _fill(text: str, field: str, old: Any, new: Any) -> str:
    unset = NOT_DECLARED if field.startswith("capabilities.") else UNSET
    added, dropped = _added(old, new), _dropped(old, new)
    added_dropped = "; ".join(
        part
        for part in (
            f"adds {', '.join(added)}" if added else "",
            f"drops {', '.join(dropped)}" if dropped else "",
        )
        if part
    )
    return text.format_map(
        {
            "from": _words(old, unset),
            "to": _words(new, unset),
            "flag": field.rpartition(".")[2],
            "added": ", ".join(added),
            "dropped": ", ".join(dropped),
            "added_dropped": added_dropped,
        }
    )


def _words(value: Any, unset: str) -> str:
    if value is None:
        return unset
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ", ".join(str(item) for item in value) or "none"
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    return str(value)


def _comparable(value: Any) -> Any:
    """Lists of names (structured-output modes, task types) compare as sets."""
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return sorted(set(value))
    return value


def _added(old: Any, new: Any) -> list[str]:
    return _missing_from(new, old)


def _dropped(old: Any, new: Any) -> list[str]:
    return _missing_from(old, new)


def _missing_from(these: Any, those: Any) -> list[str]:
    """Items of list `these` not in list `those` (unset counts as empty)."""
    if not isinstance(these, list):
        return []
    kept = those if isinstance(those, list) else []
    return sorted(str(item) for item in these if item not in kept)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
