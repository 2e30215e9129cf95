"""OTLP exports for the trace tests: JSON as a collector writes it, and protobuf."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.utils import timezone

TRACE = "5b8efff798038103d269b633813fc60c"
SPAN = "eee19b7ec3c1b174"


def nanos(moment: dt.datetime) -> str:
    return str(int(moment.timestamp() * 1e9))


def attribute(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        wrapped: dict[str, Any] = {"boolValue": value}
    elif isinstance(value, int):
        wrapped = {"intValue": str(value)}
    elif isinstance(value, float):
        wrapped = {"doubleValue": value}
    elif isinstance(value, list):
        wrapped = {"arrayValue": {"values": [{"stringValue": v} for v in value]}}
    else:
        wrapped = {"stringValue": value}
    return {"key": key, "value": wrapped}


def model_call(
    *,
    trace_id: str = TRACE,
    span_id: str = SPAN,
    started: dt.datetime | None = None,
    duration_ms: float = 1250.0,
    operation: str = "chat",
    **attributes: Any,
) -> dict[str, Any]:
    started = started or timezone.now() - dt.timedelta(minutes=5)
    facts = {
        "gen_ai.operation.name": operation,
        "gen_ai.request.model": "Model-2-7B-Instruct",
        "gen_ai.response.model": "Model-2-7B-Instruct",
        "server.address": "kb-vllm.internal",
        "server.port": 8000,
        "gen_ai.usage.input_tokens": 812,
        "gen_ai.usage.output_tokens": 164,
        "gen_ai.response.finish_reasons": ["stop"],
        **{key.replace("__", "."): value for key, value in attributes.items()},
    }
    return {
        "traceId": trace_id,
        "spanId": span_id,
        "name": f"{operation} Model-2-7B-Instruct",
        "kind": 3,
        "startTimeUnixNano": nanos(started),
        "endTimeUnixNano": nanos(started + dt.timedelta(milliseconds=duration_ms)),
        "attributes": [attribute(k, v) for k, v in facts.items() if v is not None],
    }


def export(*spans: dict[str, Any], service_name: str = "gateway") -> dict[str, Any]:
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [attribute("service.name", service_name)]},
                "scopeSpans": [{"scope": {"name": "litellm"}, "spans": list(spans)}],
            }
        ]
    }
