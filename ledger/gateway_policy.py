"""The gateway policy document: its JSON Schema (`schemas/gateway_policy.schema.json`,
published in the API schema) and the checks that need no database.

A problem is named by its JSON path and what was expected, e.g.
`tenants[1].rpm: -5 is less than the minimum of 1`. The checks that read the
registry (does the fallback service exist, is the tenant the service's, is the task
type known) are the verb's: `ledger.services.gateway_policies`.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any

from ledger.chain import canonical_json

SCHEMA_PATH = Path(__file__).parent / "schemas" / "gateway_policy.schema.json"
SECTIONS = ("limits", "tenants", "fallbacks", "degradation", "retries", "egress")
LIMITS = (
    "max_input_tokens",
    "max_output_tokens",
    "timeout_s",
    "stream_timeout_s",
    "max_parallel_requests",
)
MAX_PROBLEMS = 20

EXAMPLE: dict[str, Any] = {
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
        }
    ],
    "fallbacks": [{"on": "error", "to_service": "support-faq"}],
    "degradation": {
        "chat": {"action": "fallback", "to_service": "support-faq"},
        "sql": {
            "action": "stop",
            "message": "The data assistant is busy; nothing was run. Try again in a few minutes.",
        },
    },
    "retries": {"num_retries": 2, "allowed_fails": 3, "cooldown_s": 30},
    "egress": {"external_fallback_allowed": False},
}


@functools.cache
def schema() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(SCHEMA_PATH.read_text())
    return document


def path_of(parts: Any) -> str:
    """`tenants[1].rpm` from jsonschema's deque of keys and indexes."""
    text = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)
    return text.lstrip(".") or "(the document)"


def schema_problems(document: Any) -> list[str]:
    """Each way the document breaks the schema, by path, in document order."""
    # Imported here: jsonschema takes over a second to import (its IRI format checker
    # compiles a grammar), and most processes (workers, commands) never check a policy.
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema())
    errors = sorted(validator.iter_errors(document), key=lambda e: [str(p) for p in e.path])
    return [f"{path_of(error.absolute_path)}: {error.message}" for error in errors][:MAX_PROBLEMS]


def shape_problems(document: dict[str, Any], *, service_slug: str) -> list[str]:
    """What the schema cannot say: a tenant listed twice, a fallback to the service itself."""
    problems = []
    seen: set[str] = set()
    for index, tenant in enumerate(document.get("tenants", [])):
        if tenant["name"] in seen:
            problems.append(f"tenants[{index}].name: {tenant['name']} is listed twice.")
        seen.add(tenant["name"])
    for index, fallback in enumerate(document.get("fallbacks", [])):
        if fallback["to_service"] == service_slug:
            problems.append(
                f"fallbacks[{index}].to_service: {service_slug} cannot fall back to itself."
            )
    for task_type, rule in sorted(document.get("degradation", {}).items()):
        if rule.get("to_service") == service_slug:
            problems.append(
                f"degradation.{task_type}.to_service: {service_slug} cannot degrade to itself."
            )
    return problems


def document_sha256(document: dict[str, Any] | None) -> str:
    """`sha256:<hex>` of the canonical JSON; an unrecorded document hashes as `null`."""
    return "sha256:" + hashlib.sha256(canonical_json(document).encode()).hexdigest()


def _as_openapi(node: Any) -> Any:
    """The same rules in OpenAPI 3.0's dialect: what it lacks (`if`/`then`,
    `propertyNames`, `const`, numeric `exclusiveMinimum`) is left out or restated;
    the verb still checks the whole JSON Schema."""
    if isinstance(node, list):
        return [_as_openapi(item) for item in node]
    if not isinstance(node, dict):
        return node
    converted = {}
    for key, value in node.items():
        if key in {"$schema", "$id", "propertyNames", "allOf"}:
            continue
        if key == "exclusiveMinimum" and not isinstance(value, bool):
            converted["minimum"] = value
            converted["exclusiveMinimum"] = True
        elif key == "enum" and "type" not in node:
            converted[key] = value
            converted["type"] = "string"
        else:
            converted[key] = _as_openapi(value)
    return converted


@functools.cache
def openapi_schema() -> dict[str, Any]:
    published: dict[str, Any] = _as_openapi(schema())
    published["example"] = EXAMPLE
    return published
