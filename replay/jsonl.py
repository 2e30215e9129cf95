"""Sample sets as JSON Lines: one sample per line, so teams keep them in version control.

No database here: ``parse_samples`` validates a JSONL text into sample specs (plain
dicts with every field, defaults filled in) and reports every problem by line and
field, ``dump_samples`` writes specs back (defaults left out, keys in a fixed order),
and ``content_digest`` names the content, so that importing the same samples twice is
recognised as no change. A line looks like::

    {"key": "capital-of-france", "category": "short_qa",
     "messages": [{"role": "user", "content": "What is the capital of France?"}],
     "params": {"temperature": 0, "max_tokens": 32},
     "checks": [{"type": "contains", "value": "Paris", "case_sensitive": false}],
     "tags": ["geography"], "repeat": 3, "min_pass_rate": 0.67}

Blank lines are ignored. ``sample_spec`` validates one sample given as a mapping, for
the YAML registry documents that declare sample sets inline.

A sample with ``"rerunnable": false`` may carry ``tool_results``: what its tools
answered, recorded as short summaries, one per tool call of its last message (the
assistant's), e.g. ``{"tool_call_id": "call_1", "name": "issue_refund", "content":
"refund R-88 created"}``. Replay then sends only the model turn (replay.modelturn).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, TypedDict

from lib.storable import TOO_DEEP_TO_PARSE, find_unstorable, json_path
from replay.checks import CheckSpecError, validate_check_specs
from replay.client import ChatRequest

CATEGORIES = (
    "short_qa",
    "long_context",
    "structured_json",
    "tool_call",
    "refusal",
    "long_stream",
    "concurrency_burst",
)
ROLES = ("system", "user", "assistant", "tool", "developer")
_KEY = re.compile(r"^[-a-zA-Z0-9_]+$")
MAX_REPEAT = 50
MAX_ERRORS = 50
MAX_TOOL_RESULTS = 16
MAX_TOOL_RESULT_CHARS = 2000
TOOL_RESULT_FIELDS = ("tool_call_id", "name", "content")


class SampleSpec(TypedDict):
    key: str
    category: str
    messages: list[dict[str, Any]]
    params: dict[str, Any]
    checks: list[dict[str, Any]]
    tags: list[str]
    rerunnable: bool
    sensitive: bool
    repeat: int
    min_pass_rate: float
    tool_results: list[dict[str, str]]


# Field -> default; the order is the order a dumped line lists its keys in.
DEFAULTS: dict[str, Any] = {
    "key": None,
    "category": None,
    "tags": [],
    "messages": None,
    "params": {},
    "checks": [],
    "repeat": 1,
    "min_pass_rate": 1.0,
    "rerunnable": True,
    "sensitive": False,
    "tool_results": [],
}
FIELDS = tuple(DEFAULTS)
REQUIRED = ("key", "category", "messages")
# Fields added after digests were recorded in events: left out of the digest while they
# hold their default, so the same samples keep naming the same content.
_DIGEST_WHEN_SET = ("tool_results",)


class SampleError(ValueError):
    """A sample that cannot be used; ``field`` names where, e.g. ``checks[0].schema``."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field


class JsonlError(ValueError):
    """A JSONL text with problems; ``errors`` lists each as ``line N: field: message``."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("\n".join(errors))
        self.errors = errors


_TYPE_NAMES: dict[type, str] = {str: "text", dict: "an object", list: "a list"}


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number"
    return _TYPE_NAMES.get(type(value), type(value).__name__)


def _check_messages(messages: Any) -> None:
    if not isinstance(messages, list) or not messages:
        raise SampleError("messages", "must be a non-empty list of chat messages")
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            raise SampleError(
                where, f"must be an object with role and content, got {_type_name(message)}"
            )
        role = message.get("role")
        if role not in ROLES:
            raise SampleError(f"{where}.role", f"must be one of {', '.join(ROLES)}, got {role!r}")
        content = message.get("content")
        if content is None and role == "assistant" and message.get("tool_calls"):
            continue
        if not isinstance(content, str | list):
            raise SampleError(f"{where}.content", f"must be text, got {_type_name(content)}")
    if not any(m.get("role") == "user" for m in messages):
        raise SampleError("messages", "needs at least one user message")


def _check_params(params: Any) -> None:
    if not isinstance(params, dict):
        raise SampleError("params", f"must be an object, got {_type_name(params)}")
    try:
        ChatRequest(messages=[], params=params).body("model")
    except ValueError as error:
        raise SampleError("", str(error)) from None
    if "max_tokens" in params:
        value = params["max_tokens"]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise SampleError("params.max_tokens", "must be a whole number of at least 1")
    if "tools" in params and not isinstance(params["tools"], list):
        raise SampleError("params.tools", "must be a list of tools")
    if "response_format" in params and not isinstance(params["response_format"], dict):
        raise SampleError("params.response_format", "must be an object")


def _pending_tool_calls(messages: list[dict[str, Any]]) -> dict[str, str] | None:
    """The last message's tool calls (id -> function name) when it is the assistant's
    tool call, else None."""
    index = len(messages) - 1
    last = messages[index]
    calls = last.get("tool_calls")
    if last.get("role") != "assistant" or not calls:
        return None
    if not isinstance(calls, list):
        raise SampleError(f"messages[{index}].tool_calls", "must be a list of tool calls")
    pending: dict[str, str] = {}
    for number, call in enumerate(calls):
        where = f"messages[{index}].tool_calls[{number}]"
        if not isinstance(call, dict):
            raise SampleError(where, f"must be an object, got {_type_name(call)}")
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id:
            raise SampleError(f"{where}.id", "must be the call's id, e.g. call_1")
        function = call.get("function")
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str) or not name:
            raise SampleError(f"{where}.function.name", "must name the tool called")
        pending[call_id] = name
    return pending


def _check_tool_results(results: Any, messages: list[dict[str, Any]], rerunnable: bool) -> None:
    """One recorded result per tool call of the last (assistant) message, each a summary."""
    if not isinstance(results, list):
        raise SampleError(
            "tool_results", f"must be a list of recorded tool results, got {_type_name(results)}"
        )
    if not results:
        return
    if rerunnable:
        raise SampleError(
            "tool_results",
            'only a sample with "rerunnable": false carries recorded tool results; '
            "a re-runnable sample is sent whole",
        )
    if len(results) > MAX_TOOL_RESULTS:
        raise SampleError("tool_results", f"must hold at most {MAX_TOOL_RESULTS} results")
    pending = _pending_tool_calls(messages)
    if pending is None:
        raise SampleError(
            "messages",
            "with tool_results, the last message must be the assistant's tool call "
            "(role assistant, with tool_calls) that the recorded results answer",
        )
    answered: dict[str, int] = {}
    for index, result in enumerate(results):
        where = f"tool_results[{index}]"
        if not isinstance(result, dict):
            raise SampleError(
                where,
                f"must be an object with {', '.join(TOOL_RESULT_FIELDS)}, got {_type_name(result)}",
            )
        for name in result:
            if name not in TOOL_RESULT_FIELDS:
                raise SampleError(
                    f"{where}.{name}",
                    f"unknown field; known fields: {', '.join(TOOL_RESULT_FIELDS)}",
                )
        for name in TOOL_RESULT_FIELDS:
            if name not in result:
                raise SampleError(f"{where}.{name}", "is required")
            if not isinstance(result[name], str) or not result[name].strip():
                raise SampleError(
                    f"{where}.{name}", f"must be non-empty text, got {_type_name(result[name])}"
                )
        call_id = result["tool_call_id"]
        if call_id not in pending:
            raise SampleError(
                f"{where}.tool_call_id",
                f"{call_id!r} is not a tool call of the last message; its calls: "
                f"{', '.join(map(repr, pending))}",
            )
        if call_id in answered:
            raise SampleError(
                f"{where}.tool_call_id",
                f"{call_id!r} is already answered by tool_results[{answered[call_id]}]",
            )
        answered[call_id] = index
        if result["name"] != pending[call_id]:
            raise SampleError(
                f"{where}.name",
                f"must be {pending[call_id]!r}, the tool that call {call_id!r} called",
            )
        length = len(result["content"])
        if length > MAX_TOOL_RESULT_CHARS:
            raise SampleError(
                f"{where}.content",
                f"is {length} characters; a recorded result is a summary of at most "
                f"{MAX_TOOL_RESULT_CHARS}",
            )
    unanswered = [call_id for call_id in pending if call_id not in answered]
    if unanswered:
        raise SampleError(
            "tool_results",
            f"no recorded result for tool call {', '.join(map(repr, unanswered))} of the "
            "last message; every call needs one",
        )


def sample_spec(data: Any) -> SampleSpec:
    """One sample, validated, with every field (defaults filled in); raises SampleError."""
    if not isinstance(data, dict):
        raise SampleError("", f"a sample must be a JSON object, got {_type_name(data)}")
    # First: the messages below echo keys, and a lone surrogate cannot be rendered.
    unstorable = find_unstorable(data)
    if unstorable is not None:
        raise SampleError(json_path(unstorable.path), f"{unstorable.problem}; {unstorable.allowed}")
    for name in data:
        if name not in DEFAULTS:
            raise SampleError(str(name), f"unknown field; known fields: {', '.join(FIELDS)}")
    for name in REQUIRED:
        if name not in data:
            raise SampleError(name, "is required")
    spec: dict[str, Any] = {
        name: data.get(name, json.loads(json.dumps(default))) for name, default in DEFAULTS.items()
    }
    key = spec["key"]
    if not isinstance(key, str) or not _KEY.match(key) or len(key) > 100:
        raise SampleError("key", "must be 1-100 letters, digits, '-' or '_'")
    if spec["category"] not in CATEGORIES:
        raise SampleError("category", f"must be one of {', '.join(CATEGORIES)}")
    _check_messages(spec["messages"])
    _check_params(spec["params"])
    try:
        validate_check_specs(spec["checks"])
    except CheckSpecError as error:
        raise SampleError(error.field, str(error).removeprefix(f"{error.field}: ")) from None
    tags = spec["tags"]
    if not isinstance(tags, list) or not all(isinstance(t, str) and t for t in tags):
        raise SampleError("tags", "must be a list of non-empty texts")
    for name in ("rerunnable", "sensitive"):
        if not isinstance(spec[name], bool):
            raise SampleError(name, "must be true or false")
    repeat = spec["repeat"]
    if isinstance(repeat, bool) or not isinstance(repeat, int) or not 1 <= repeat <= MAX_REPEAT:
        raise SampleError("repeat", f"must be a whole number from 1 to {MAX_REPEAT}")
    rate = spec["min_pass_rate"]
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 <= rate <= 1:
        raise SampleError("min_pass_rate", "must be a number from 0 to 1")
    spec["min_pass_rate"] = float(rate)
    _check_tool_results(spec["tool_results"], spec["messages"], spec["rerunnable"])
    return SampleSpec(**spec)  # type: ignore[typeddict-item]


def parse_samples(text: str) -> list[SampleSpec]:
    """Every sample of a JSONL text, or JsonlError listing each problem by line and field."""
    errors: list[str] = []
    specs: list[SampleSpec] = []
    first_line: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if len(errors) >= MAX_ERRORS:
            errors.append(f"line {number}: … stopped after {MAX_ERRORS} problems")
            break
        try:
            data = json.loads(line)
        except json.JSONDecodeError as error:
            errors.append(f"line {number}: not JSON: {error.msg} (column {error.colno})")
            continue
        except RecursionError:
            errors.append(f"line {number}: not JSON: {TOO_DEEP_TO_PARSE}")
            continue
        try:
            spec = sample_spec(data)
        except SampleError as error:
            errors.append(f"line {number}: {error}")
            continue
        if spec["key"] in first_line:
            errors.append(
                f"line {number}: key: {spec['key']!r} is already used on line "
                f"{first_line[spec['key']]}"
            )
            continue
        first_line[spec["key"]] = number
        specs.append(spec)
    if not specs and not errors:
        errors.append("line 1: the text holds no samples (one JSON object per line)")
    if errors:
        raise JsonlError(errors)
    return specs


def compact(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A spec without its default values, keys in the order of ``FIELDS``."""
    return {
        name: spec[name]
        for name in FIELDS
        if name in spec and (DEFAULTS[name] is None or spec[name] != DEFAULTS[name])
    }


def dump_samples(specs: Iterable[Mapping[str, Any]]) -> str:
    """JSONL, one sample per line in key order, defaults left out."""
    ordered = sorted(specs, key=lambda spec: spec["key"])
    return "".join(json.dumps(compact(spec), ensure_ascii=False) + "\n" for spec in ordered)


def content_digest(specs: Iterable[Mapping[str, Any]]) -> str:
    """The same samples, in any order and however formatted, give the same digest."""
    canonical = [
        json.dumps(
            {
                name: spec[name]
                for name in FIELDS
                if name not in _DIGEST_WHEN_SET or spec[name] != DEFAULTS[name]
            },
            sort_keys=True,
            separators=(",", ":"),
        )
        for spec in sorted(specs, key=lambda spec: spec["key"])
    ]
    return "sha256:" + hashlib.sha256("\n".join(canonical).encode()).hexdigest()
