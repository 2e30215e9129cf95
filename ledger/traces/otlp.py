"""OTLP/HTTP trace exports read into the facts the ledger keeps of each model call.

No Django here. `decode` turns a request body (protobuf or OTLP JSON, gzip, deflate or
plain) into an `ExportTraceServiceRequest`, or raises `OtlpRefused` with the HTTP
status and a message naming the path. `extract` walks its spans and keeps, from each
span of a model call (`gen_ai.operation.name` chat or text_completion), only the
structured facts of `SpanFacts`; every other span is skipped, and a span whose facts
do not hold (a malformed id, a negative token count) is rejected with its reason, as
OTLP's partial success reports it.

**Content is never kept.** The attributes that carry prompts, completions, system
instructions, tool arguments and retrieved documents, and every span event whose name
starts with `gen_ai.` (the events that carry messages), are counted in
`Extracted.content_dropped` and go no further than this module.

Attribute names are those of the OpenTelemetry GenAI semantic conventions
(open-telemetry/semantic-conventions-genai `model/gen-ai/registry.yaml`): the
conventions put latency on spans only as `gen_ai.response.time_to_first_chunk`
(seconds); an engine's own `gen_ai.latency.*` attributes are kept as sent (in seconds,
stored in ms) when present.

OTLP JSON is proto3 JSON but for the ids, which are hex: they are turned into the
base64 proto3 JSON expects before parsing (hex digits are valid base64, so parsing them
as they come would silently yield wrong ids).
"""

from __future__ import annotations

import base64
import datetime as dt
import math
import re
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue

# A trace id as the ledger stores and looks it up: 32 lower-case hex digits.
TRACE_ID = re.compile(r"^[0-9a-f]{32}$")
PROTOBUF = "application/x-protobuf"
# What an `error.type` says when the call was refused for a limit: 429, a rate limit, a
# quota (providers and gateways name it each their way).
_LIMIT_WORDS = ("429", "rate_limit", "ratelimit", "quota", "too many requests")
JSON = "application/json"
MODEL_CALLS = frozenset({"chat", "text_completion"})
# Attributes that carry what people wrote or were answered: dropped, counted.
CONTENT_ATTRIBUTES = frozenset(
    {
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
        "gen_ai.tool.definitions",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
        "gen_ai.retrieval.query.text",
        "gen_ai.retrieval.documents",
        "gen_ai.prompt",
        "gen_ai.completion",
    }
)
CONTENT_EVENT_PREFIX = "gen_ai."
LATENCY_PREFIX = "gen_ai.latency."
_ID_BYTES = {"traceId": 16, "spanId": 8, "parentSpanId": 8}
# Column widths of ledger.ModelCallSpan: longer text is cut, never refused.
_WIDTH = {
    "name": 200,
    "operation": 40,
    "request_model": 200,
    "response_model": 200,
    "server_address": 255,
    "error_type": 200,
    "service_slug": 100,
    "tenant": 100,
    "task_type": 40,
    "gateway_policy_version": 40,
    "degradation": 100,
    "resource_service": 200,
}
_MAX_FINISH_REASONS = 16
_MAX_INT = 2**63 - 1


class OtlpRefused(Exception):
    """The whole export is refused: `status` (400, 413 or 415) and why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class SpanFacts:
    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    started_at: dt.datetime
    duration_ms: float
    operation: str
    request_model: str = ""
    response_model: str = ""
    server_address: str = ""
    server_port: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    finish_reasons: list[str] = field(default_factory=list)
    error_type: str = ""
    ttft_ms: float | None = None
    latency_ms: dict[str, float] = field(default_factory=dict)
    service_slug: str = ""
    tenant: str = ""
    task_type: str = ""
    gateway_policy_version: str = ""
    degradation: str = ""
    retry_count: int | None = None
    resource_service: str = ""


@dataclass
class Extracted:
    spans: list[SpanFacts] = field(default_factory=list)
    # (path, reason) of each model-call span refused.
    rejected: list[tuple[str, str]] = field(default_factory=list)
    skipped: int = 0  # spans that are not model calls
    content_dropped: int = 0  # content attributes and events dropped


# ---------------------------------------------------------------- decoding


def inflate(body: bytes, encoding: str, limit: int) -> bytes:
    """The body as sent before `Content-Encoding` (gzip, deflate or none), at most `limit`
    bytes once inflated (413 beyond: a small body may inflate to gigabytes)."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        data = body
    elif encoding in ("gzip", "deflate"):
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS if encoding == "gzip" else zlib.MAX_WBITS)
        try:
            data = inflater.decompress(body, limit + 1)
        except zlib.error as error:
            raise OtlpRefused(
                400, f"Content-Encoding {encoding}: not {encoding} data ({error})"
            ) from None
        if not inflater.eof and len(data) <= limit:
            raise OtlpRefused(400, f"Content-Encoding {encoding}: the data ends early")
    else:
        raise OtlpRefused(415, f"Content-Encoding {encoding!r}: expected gzip, deflate or none")
    if len(data) > limit:
        raise OtlpRefused(413, f"the export is over {limit:,} bytes once inflated")
    return data


def decode(body: bytes, content_type: str) -> ExportTraceServiceRequest:
    from google.protobuf import json_format
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    kind = content_type.split(";")[0].strip().lower()
    request = ExportTraceServiceRequest()
    if kind == PROTOBUF:
        try:
            request.ParseFromString(body)
        except (DecodeError, RecursionError) as error:
            raise OtlpRefused(
                400, f"not an ExportTraceServiceRequest in protobuf: {error}"
            ) from None
        return request
    if kind != JSON:
        raise OtlpRefused(415, f"Content-Type {kind!r}: expected {PROTOBUF} or {JSON}")
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as error:
        raise OtlpRefused(400, f"not JSON: {error}") from None
    if not isinstance(data, dict):
        raise OtlpRefused(400, "$: expected an object with resourceSpans")
    _hex_ids_to_base64(data)
    try:
        json_format.ParseDict(data, request, ignore_unknown_fields=True)
    except (json_format.ParseError, RecursionError, ValueError, TypeError) as error:
        raise OtlpRefused(400, f"not an OTLP JSON export: {error}") from None
    return request


def _hex_ids_to_base64(data: dict[str, Any]) -> None:
    """The hex ids of OTLP JSON in place as proto3 JSON's base64, refusing a bad one by path."""
    for r, resource in enumerate(_list(data, "resourceSpans", "$")):
        for s, scope in enumerate(_list(resource, "scopeSpans", f"$.resourceSpans[{r}]")):
            where = f"$.resourceSpans[{r}].scopeSpans[{s}]"
            for n, span in enumerate(_list(scope, "spans", where)):
                path = f"{where}.spans[{n}]"
                if not isinstance(span, dict):
                    raise OtlpRefused(400, f"{path}: expected a span object")
                links = span.get("links") or []
                if not isinstance(links, list):
                    raise OtlpRefused(400, f"{path}.links: expected a list")
                for owner, at in [(span, path), *((link, f"{path}.links") for link in links)]:
                    if not isinstance(owner, dict):
                        raise OtlpRefused(400, f"{at}: expected an object")
                    for key, size in _ID_BYTES.items():
                        value = owner.get(key)
                        if value in (None, ""):
                            continue
                        try:
                            raw = bytes.fromhex(value) if isinstance(value, str) else b""
                        except ValueError:
                            raw = b""
                        if len(raw) != size:
                            raise OtlpRefused(
                                400, f"{at}.{key}: expected {size * 2} hex digits, found {value!r}"
                            )
                        owner[key] = base64.b64encode(raw).decode("ascii")


def _list(owner: Any, key: str, path: str) -> list[Any]:
    if not isinstance(owner, dict):
        raise OtlpRefused(400, f"{path}: expected an object")
    value = owner.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise OtlpRefused(400, f"{path}.{key}: expected a list")
    return value


# ---------------------------------------------------------------- extracting


def value_of(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [value_of(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return {item.key: value_of(item.value) for item in value.kvlist_value.values}
    return getattr(value, kind)


def extract(request: ExportTraceServiceRequest) -> Extracted:
    out = Extracted()
    for r, resource_spans in enumerate(request.resource_spans):
        resource = {a.key: a.value for a in resource_spans.resource.attributes}
        service_name = (
            _text(value_of(resource["service.name"])) if "service.name" in resource else ""
        )
        for s, scope_spans in enumerate(resource_spans.scope_spans):
            for n, span in enumerate(scope_spans.spans):
                path = f"resourceSpans[{r}].scopeSpans[{s}].spans[{n}]"
                attributes: dict[str, Any] = {}
                for attribute in span.attributes:
                    if attribute.key in CONTENT_ATTRIBUTES:
                        out.content_dropped += 1
                    else:
                        attributes[attribute.key] = value_of(attribute.value)
                out.content_dropped += sum(
                    1 for event in span.events if event.name.startswith(CONTENT_EVENT_PREFIX)
                )
                if attributes.get("gen_ai.operation.name") not in MODEL_CALLS:
                    out.skipped += 1
                    continue
                try:
                    facts = _facts(span, attributes)
                except ValueError as error:
                    out.rejected.append((path, str(error)))
                    continue
                facts.resource_service = _cut("resource_service", service_name)
                out.spans.append(facts)
    return out


def _facts(span: Any, attributes: dict[str, Any]) -> SpanFacts:
    trace_id, span_id = span.trace_id.hex(), span.span_id.hex()
    if len(span.trace_id) != 16 or not any(span.trace_id):
        raise ValueError(f"traceId: expected 16 bytes, not all zero, found {trace_id!r}")
    if len(span.span_id) != 8 or not any(span.span_id):
        raise ValueError(f"spanId: expected 8 bytes, not all zero, found {span_id!r}")
    if span.parent_span_id and len(span.parent_span_id) != 8:
        raise ValueError(f"parentSpanId: expected 8 bytes, found {span.parent_span_id.hex()!r}")
    start, end = span.start_time_unix_nano, span.end_time_unix_nano
    if not start:
        raise ValueError("startTimeUnixNano: expected the span's start")
    if end < start:
        raise ValueError("endTimeUnixNano: before startTimeUnixNano")
    started_at = dt.datetime.fromtimestamp(start / 1e9, tz=dt.UTC)
    ttft = _seconds(attributes, "gen_ai.response.time_to_first_chunk")
    return SpanFacts(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=span.parent_span_id.hex(),
        name=_cut("name", _text(span.name)),
        started_at=started_at,
        duration_ms=(end - start) / 1e6,
        operation=attributes["gen_ai.operation.name"],
        request_model=_string(attributes, "gen_ai.request.model", "request_model"),
        response_model=_string(attributes, "gen_ai.response.model", "response_model"),
        server_address=_string(attributes, "server.address", "server_address"),
        server_port=_count(attributes, "server.port", maximum=65535),
        input_tokens=_count(attributes, "gen_ai.usage.input_tokens"),
        output_tokens=_count(attributes, "gen_ai.usage.output_tokens"),
        finish_reasons=_reasons(attributes.get("gen_ai.response.finish_reasons")),
        error_type=_string(attributes, "error.type", "error_type"),
        ttft_ms=None if ttft is None else ttft * 1000,
        latency_ms={
            key.removeprefix(LATENCY_PREFIX): seconds * 1000
            for key in sorted(attributes)
            if key.startswith(LATENCY_PREFIX) and (seconds := _seconds(attributes, key)) is not None
        },
        service_slug=_string(attributes, "ledger.service", "service_slug"),
        tenant=_string(attributes, "ledger.tenant", "tenant"),
        task_type=_string(attributes, "ledger.task_type", "task_type"),
        gateway_policy_version=_string(
            attributes, "ledger.gateway_policy_version", "gateway_policy_version"
        ),
        degradation=_string(attributes, "ledger.degradation", "degradation"),
        retry_count=_count(attributes, "ledger.retry_count", maximum=10_000),
    )


def _text(value: Any) -> str:
    """Text PostgreSQL can store: no NUL, no lone surrogate (OTLP JSON may carry either)."""
    text = value if isinstance(value, str) else "" if value is None else str(value)
    return text.replace("\x00", "").encode("utf-8", "replace").decode("utf-8")


def _cut(column: str, text: str) -> str:
    return text[: _WIDTH[column]]


def _string(attributes: dict[str, Any], key: str, column: str) -> str:
    value = attributes.get(key)
    if value is None:
        return ""
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        raise ValueError(f"{key}: expected a string, found {type(value).__name__}")
    return _cut(column, _text(value))


def _count(attributes: dict[str, Any], key: str, *, maximum: int = _MAX_INT) -> int | None:
    value = attributes.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= maximum:
        raise ValueError(f"{key}: expected a whole number from 0 to {maximum}, found {value!r}")
    return value


def _seconds(attributes: dict[str, Any], key: str) -> float | None:
    value = attributes.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{key}: expected seconds as a number, found {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{key}: expected seconds, at least 0, found {value!r}")
    return float(value)


def _reasons(value: Any) -> list[str]:
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    return [_text(item)[:40] for item in items[:_MAX_FINISH_REASONS]]


def is_limit_error(error_type: str) -> bool:
    """Whether a span's `error.type` says the call was over a limit."""
    lowered = error_type.lower()
    return any(word in lowered for word in _LIMIT_WORDS)


def json_response(rejected: int = 0, message: str = "") -> bytes:
    """ExportTraceServiceResponse as OTLP JSON: `{}`, or its partial success."""
    if not rejected and not message:
        return b"{}"
    return orjson.dumps(
        {"partialSuccess": {"rejectedSpans": str(rejected), "errorMessage": message}}
    )


def protobuf_response(rejected: int = 0, message: str = "") -> bytes:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceResponse,
    )

    response = ExportTraceServiceResponse()
    if rejected or message:
        response.partial_success.rejected_spans = rejected
        response.partial_success.error_message = message
    return response.SerializeToString()


def status_body(content_type: str, message: str, code: int) -> tuple[bytes, str]:
    """A google.rpc.Status in the request's encoding (protobuf unless it sent JSON)."""
    if content_type.split(";")[0].strip().lower() == JSON:
        return orjson.dumps({"code": code, "message": message}), JSON
    from google.rpc import status_pb2

    return status_pb2.Status(code=code, message=message).SerializeToString(), PROTOBUF
