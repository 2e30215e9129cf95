"""The shapes of the release form's JSON columns, checked with jsonschema by the verbs.

A draft may be incomplete (an empty list, a stage without guards yet): the
schemas say what is well formed, the gates say what is complete. Each field
has an example, shown with the error, and `validate_json_fields` names the
field and the JSON path of the first problem.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.core.exceptions import ValidationError
from django.utils.translation import gettext_noop

from releases.guards import BUCKETS_KEY, GUARD_METRICS, LEGACY_MEASURES, MEASURES

if TYPE_CHECKING:
    from jsonschema import ValidationError as ValidationErrorOfJsonschema

# Their labels stay English where they are written (gate reasons, and so the snapshot
# hash that sign-offs are bound to); gettext_noop puts them in the catalog, and pages
# and forms show them translated (lib.forms.shown_choices).
DOWNSTREAM_SYSTEMS: dict[str, str] = {
    "front_end": gettext_noop("Front end"),
    "agent_runtime": gettext_noop("Agent runtime"),
    "tool_registry": gettext_noop("Tool registry"),
    "dataagent": gettext_noop("DataAgent"),
    "trace": gettext_noop("Trace"),
    "eval": gettext_noop("Eval"),
    "security": gettext_noop("Security"),
    "cost_view": gettext_noop("Cost view"),
}

METRICS: dict[str, str] = {
    "ttft": gettext_noop("Time to first token"),
    "tpot": gettext_noop("Time per output token"),
    "tokens_per_s": gettext_noop("Tokens per second"),
    "queue_length": gettext_noop("Queue length"),
    "gpu_memory": gettext_noop("GPU memory"),
    "kv_cache_usage": gettext_noop("KV-cache usage"),
    "error_rate": gettext_noop("Error rate"),
}

CLASSIFICATIONS: dict[str, str] = {
    "blocks": gettext_noop("Blocks release"),
    "degradation": gettext_noop("Handled by degradation"),
    "risk_accepted": gettext_noop("Risk accepted by the business owner"),
}

# Guards a gray stage may carry: a stage is held or rolled back when one is crossed
# (`releases.guards` judges them; these are the ones the form offers).
GUARDS: dict[str, str] = {
    "ttft_p95_ms": "p95 TTFT (ms)",
    "error_rate_pct": "error rate (%)",
    "structured_error_rate_pct": "structured-output error rate (%)",
}

DECOMMISSION_KINDS = ("tenant", "task_type", "sample_set")

_TEXT = {"type": "string", "maxLength": 2000}
_NAME = {"type": "string", "minLength": 1, "maxLength": 100}
_PROMQL = {"type": "string", "minLength": 1, "maxLength": 4000}


def _list_of(item: dict[str, Any], max_items: int = 200) -> dict[str, Any]:
    return {"type": "array", "items": item, "maxItems": max_items}


SCHEMAS: dict[str, dict[str, Any]] = {
    "impact_tenants": {**_list_of(_NAME), "uniqueItems": True},
    "impact_task_types": {**_list_of(_NAME), "uniqueItems": True},
    "impact_downstream": {
        **_list_of({"enum": list(DOWNSTREAM_SYSTEMS)}),
        "uniqueItems": True,
    },
    "impact_dismissed": _list_of(
        {
            "type": "object",
            "required": ["system", "reason"],
            "additionalProperties": False,
            "properties": {
                "system": {"enum": list(DOWNSTREAM_SYSTEMS)},
                "reason": {**_TEXT, "minLength": 1},
            },
        },
        len(DOWNSTREAM_SYSTEMS),
    ),
    "required_sample_sets": {**_list_of(_NAME, 50), "uniqueItems": True},
    "metrics_declared": {**_list_of({"enum": list(METRICS)}), "uniqueItems": True},
    "failure_classifications": _list_of(
        {
            "type": "object",
            "required": ["sample_set", "sample", "classification"],
            "additionalProperties": False,
            "properties": {
                "sample_set": _NAME,
                "sample": _NAME,
                "classification": {"enum": list(CLASSIFICATIONS)},
                "degradation": _TEXT,
                "note": _TEXT,
            },
        },
        2000,
    ),
    "gray_stages": _list_of(
        {
            "type": "object",
            "required": ["traffic_pct", "observation_minutes"],
            "additionalProperties": False,
            "properties": {
                "traffic_pct": {"type": "number", "exclusiveMinimum": 0, "maximum": 100},
                "observation_minutes": {"type": "integer", "minimum": 1, "maximum": 43200},
                "guards": {
                    "type": "object",
                    "propertyNames": {"enum": list(GUARD_METRICS)},
                    "additionalProperties": {
                        "oneOf": [
                            {"type": "number", "minimum": 0},
                            {
                                "type": "object",
                                "additionalProperties": False,
                                "minProperties": 1,
                                "properties": {
                                    "max": {"type": "number", "minimum": 0},
                                    "max_increase_pct": {"type": "number", "minimum": 0},
                                    "min_requests": {"type": "integer", "minimum": 0},
                                    "critical": {"type": "boolean"},
                                    "dry_run": {"type": "boolean"},
                                },
                            },
                        ]
                    },
                },
                "failure_limit": {"type": "integer", "minimum": 0, "maximum": 100},
                "error_limit": {"type": "integer", "minimum": 0, "maximum": 100},
                "analysis": {
                    "type": "object",
                    "required": ["source"],
                    "additionalProperties": False,
                    "properties": {
                        "source": {"enum": ["prometheus"]},
                        "interval_s": {"type": "integer", "minimum": 10, "maximum": 3600},
                        "consecutive_error_limit": {
                            "type": "integer",
                            "minimum": 1,
                            "maximum": 100,
                        },
                        "on_breach": {"enum": ["hold", "rollback"]},
                        "auto_promote": {"type": "boolean"},
                        "queries": {
                            "type": "object",
                            "propertyNames": {"enum": list(GUARD_METRICS)},
                            "additionalProperties": {
                                "type": "object",
                                "additionalProperties": False,
                                "required": ["candidate", "baseline"],
                                "properties": {
                                    "candidate": _PROMQL,
                                    "baseline": _PROMQL,
                                },
                            },
                        },
                    },
                },
            },
        },
        20,
    ),
    "rollback_triggers": _list_of({"type": "string", "minLength": 1, "maxLength": 500}, 50),
    "decommission_moves": _list_of(
        {
            "type": "object",
            "required": ["kind", "name", "moved_to"],
            "additionalProperties": False,
            "properties": {
                "kind": {"enum": list(DECOMMISSION_KINDS)},
                "name": _NAME,
                "moved_to": {"type": "string", "maxLength": 200},
            },
        }
    ),
    "logging_policy": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "debug_logs": {"enum": ["off", "sampled", "full"]},
            "audit_logs": {"enum": ["off", "on"]},
            "sensitive_retention_days": {"type": "integer", "minimum": 0, "maximum": 3650},
        },
    },
}

EXAMPLES: dict[str, str] = {
    "impact_tenants": '["support", "sales"]',
    "impact_task_types": '["chat", "rag"]',
    "impact_downstream": '["agent_runtime", "trace"]',
    "impact_dismissed": '[{"system": "front_end", "reason": "no page streams from this service"}]',
    "required_sample_sets": '["kb-golden", "json-contracts"]',
    "metrics_declared": '["ttft", "tpot", "tokens_per_s", "queue_length", "gpu_memory", '
    '"kv_cache_usage", "error_rate"]',
    "failure_classifications": '[{"sample_set": "kb-golden", "sample": "refund-policy", '
    '"classification": "degradation", "degradation": "falls back to search results"}]',
    "gray_stages": '[{"traffic_pct": 5, "observation_minutes": 60, "guards": '
    '{"ttft_p95_ms": {"max": 900, "max_increase_pct": 20, "critical": true}, '
    '"error_rate_pct": 1, "structured_error_rate_pct": 2}, "failure_limit": 1, '
    '"analysis": {"source": "prometheus", "interval_s": 60, "on_breach": "hold", '
    '"auto_promote": false}}]',
    "rollback_triggers": '["p95 TTFT above 1200 ms for 10 min"]',
    "decommission_moves": '[{"kind": "tenant", "name": "support", "moved_to": "kb-assistant"}]',
    "logging_policy": '{"debug_logs": "off", "audit_logs": "on", "sensitive_retention_days": 30}',
}


_SIDE: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "requests": {"type": "integer", "minimum": 0},
        **{
            key: (
                {"type": "number", "minimum": 0, "maximum": 100}
                if key.endswith("_pct")
                else {"type": "number", "minimum": 0}
            )
            for key in [*MEASURES, *LEGACY_MEASURES]
        },
        # A TTFT histogram over the window: cumulative [le, count] pairs, "+Inf" last.
        BUCKETS_KEY: {
            "type": "array",
            "maxItems": 200,
            "items": {
                "type": "array",
                "prefixItems": [
                    {"anyOf": [{"type": "number"}, {"const": "+Inf"}]},
                    {"type": "number", "minimum": 0},
                ],
                "minItems": 2,
                "maxItems": 2,
            },
        },
    },
}
OBSERVATION_SCHEMAS: dict[str, dict[str, Any]] = {"candidate": _SIDE, "baseline": _SIDE}
OBSERVATION_EXAMPLE = (
    '{"requests": 1200, "ttft_p95_ms": 640, "ttft_p99_ms": 910, "tpot_ms": 21, '
    '"error_rate_pct": 0.2, "structured_error_rate_pct": 0.5, "tool_call_success_pct": 98, '
    '"refusal_rate_pct": 0.4}'
)


def validate_observation(values: dict[str, Any]) -> None:
    """Refuse, naming the side and the key, an observation's aggregates that do not fit."""
    import jsonschema  # over a second to import: only where a value is checked

    errors: dict[str, str] = {}
    for name, value in values.items():
        error = jsonschema.exceptions.best_match(
            jsonschema.Draft202012Validator(OBSERVATION_SCHEMAS[name]).iter_errors(value)
        )
        if error is not None:
            errors[name] = f"{name}{_path(error)}: {error.message}. Example: {OBSERVATION_EXAMPLE}"
    if errors:
        raise ValidationError(errors)


def _path(error: ValidationErrorOfJsonschema) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)


def validate_json_fields(values: dict[str, Any]) -> None:
    """Refuse, naming every bad field, the JSON values in `values` that do not fit their schema."""
    import jsonschema

    errors: dict[str, str] = {}
    for name, value in values.items():
        schema = SCHEMAS.get(name)
        if schema is None:
            continue
        error = jsonschema.exceptions.best_match(
            jsonschema.Draft202012Validator(schema).iter_errors(value)
        )
        if error is not None:
            where = _path(error)
            errors[name] = (
                f"{name}{where}: {error.message}. Example: {EXAMPLES[name]}"
                if where
                else f"{error.message}. Example: {EXAMPLES[name]}"
            )
    if errors:
        raise ValidationError(errors)
