"""Which downstream systems a release touches, suggested from the revision diff (the
seed's §6.12), for the form to offer and the `impact_assessed` gate to hold the filer to.

| what the diff changes                                                   | suggests |
|-------------------------------------------------------------------------|----------|
| streaming, the chat template                                            | Front end |
| structured output, tool calling, the grammar backend, the tool parser   | Tool registry, DataAgent |
| the model, its weights, quantization (the asset's or the engine's), the KV-cache type or the tokenizer | Eval |
| the gateway policy (limits, tenants, degradation, egress)               | Security, Cost view |
| anything                                                                | Trace |

A service's first release changes everything its candidate sets. Each suggested
system is ticked among the release's downstream systems or dismissed with a reason
(`Release.impact_dismissed`).
"""

from __future__ import annotations

from collections.abc import Iterable

from ledger.queries.diff import Change
from releases.schemas import DOWNSTREAM_SYSTEMS

# (the systems, the diff's fields that bring them in: a name, or a prefix ending in ".")
SUGGESTIONS: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (
        ("front_end",),
        (
            "capabilities.streaming",
            "chat_template_digest",
            "launch_parameters.chat_template",
            "launch_parameters.chat_format",
        ),
    ),
    (
        ("tool_registry", "dataagent"),
        (
            "capabilities.structured_output",
            "capabilities.tool_calling",
            "launch_parameters.guided_decoding_backend",
            "launch_parameters.grammar_backend",
            "launch_parameters.tool_call_parser",
            "launch_parameters.enable_auto_tool_choice",
        ),
    ),
    (
        ("eval",),
        (
            "model_asset",
            "family",
            "weights_digest",
            "quantization",
            "tokenizer_id",
            "tokenizer_digest",
            "launch_parameters.quantization",
            "launch_parameters.quantize",
            "launch_parameters.kv_cache_dtype",
        ),
    ),
    (("security", "cost_view"), ("gateway_policy_version", "gateway_policy.")),
)
ANY_CHANGE = "trace"


def _matches(field: str, names: tuple[str, ...]) -> bool:
    return any(field == name or (name.endswith(".") and field.startswith(name)) for name in names)


def suggested_systems(changes: Iterable[Change]) -> dict[str, list[str]]:
    """Each downstream system the changes suggest, in `DOWNSTREAM_SYSTEMS` order, with
    the changed fields that suggest it (none for Trace: any change does)."""
    fields = [change["field"] for change in changes]
    if not fields:
        return {}
    found: dict[str, list[str]] = {}
    for systems, names in SUGGESTIONS:
        why = [field for field in fields if _matches(field, names)]
        if why:
            for system in systems:
                found.setdefault(system, []).extend(why)
    found[ANY_CHANGE] = []
    return {system: found[system] for system in DOWNSTREAM_SYSTEMS if system in found}


def dismissed(release_dismissals: object) -> dict[str, str]:
    """The release's dismissed systems with their reasons; a dismissal without a reason
    does not count."""
    if not isinstance(release_dismissals, list):
        return {}
    return {
        str(entry["system"]): str(entry.get("reason", "")).strip()
        for entry in release_dismissals
        if isinstance(entry, dict) and entry.get("system") and str(entry.get("reason", "")).strip()
    }
