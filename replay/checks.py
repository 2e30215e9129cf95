"""A sample's checks, evaluated against a replay result. Pure functions, no I/O.

A check spec is a plain, JSON-storable dict; ``type`` picks the check, ``label`` (any
check) names it in results instead of its type, the other keys are the check's own:

    {"type": "json_schema", "schema": {...}, "allow_fences": false}
    {"type": "regex", "pattern": "^\\d{4}-\\d{2}", "flags": "im", "fullmatch": false}
    {"type": "contains", "value": "Paris", "case_sensitive": true}
    {"type": "not_contains", "value": "as an AI", "case_sensitive": false}
    {"type": "refusal", "expected": true, "markers": ["i can't help", ...]}
    {"type": "tool_call", "name": "get_weather", "arguments_schema": {...}}
    {"type": "max_ttft_ms", "value": 2000}
    {"type": "max_tpot_ms", "value": 80}

``json_schema`` does not strip Markdown fences unless ``allow_fences`` is true: a
structured-output sample asks the backend for bare JSON (``response_format``), and
a fenced answer is the symptom of a backend whose guided decoding stopped working,
which is what replay is there to catch. Samples that only prompt for JSON and
accept what chat models habitually write set ``allow_fences``. Surrounding
whitespace is always ignored. ``format`` keywords (date-time, email, ...) are
asserted.

Refusal markers are matched case-insensitively, with typographic apostrophes
folded to ASCII ones; ``"expected": false`` asserts the answer is *not* a refusal
(over-refusal after a quantization switch is a regression too).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from referencing.exceptions import Unresolvable

if TYPE_CHECKING:
    from replay.client import ReplayResult

DEFAULT_REFUSAL_MARKERS = (
    "i'm sorry",
    "i am sorry",
    "i apologize",
    "i can't help",
    "i cannot help",
    "i can't assist",
    "i cannot assist",
    "i can't provide",
    "i cannot provide",
    "i can't comply",
    "i cannot comply",
    "i'm unable to",
    "i am unable to",
    "i'm not able to",
    "i am not able to",
    "i won't be able to",
    "as an ai",
)

_SNIPPET = 200
_FENCE = re.compile(r"\A```[A-Za-z0-9_-]*[ \t]*\n(.*?)\n?```\Z", re.DOTALL)
_REGEX_FLAGS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "x": re.VERBOSE}

# type -> (required keys, optional keys); "type" and "label" are allowed everywhere.
SPEC_FIELDS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "json_schema": (frozenset({"schema"}), frozenset({"allow_fences"})),
    "regex": (frozenset({"pattern"}), frozenset({"flags", "fullmatch"})),
    "contains": (frozenset({"value"}), frozenset({"case_sensitive"})),
    "not_contains": (frozenset({"value"}), frozenset({"case_sensitive"})),
    "refusal": (frozenset(), frozenset({"markers", "expected"})),
    "tool_call": (frozenset(), frozenset({"name", "arguments_schema"})),
    "max_ttft_ms": (frozenset({"value"}), frozenset()),
    "max_tpot_ms": (frozenset({"value"}), frozenset()),
}


class CheckSpecError(ValueError):
    """A check spec that cannot be evaluated; ``field`` names where, e.g. ``checks[1].pattern``."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


@dataclass(frozen=True)
class CheckOutcome:
    name: str
    passed: bool
    expected: str
    got: str
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class _ToolCall(Protocol):
    name: str
    arguments: str


class Checked(Protocol):
    """What checks read from a result (``replay.client.ReplayResult`` has all of it)."""

    output_text: str
    ttft_ms: float | None
    tpot_ms: float | None

    @property
    def tool_calls(self) -> Sequence[_ToolCall]: ...


# -- validation ---------------------------------------------------------------------


def _check_schema(schema: Any, field: str) -> None:
    if not isinstance(schema, dict):
        raise CheckSpecError(field, "must be a JSON Schema object")
    import jsonschema  # over a second to import: only where a check is read (see schemas)

    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.exceptions.SchemaError as error:
        raise CheckSpecError(f"{field}{error.json_path[1:]}", error.message) from None


def _require(condition: object, field: str, message: str) -> None:
    """Refuse ``field`` unless ``condition`` is truthy."""
    if not condition:
        raise CheckSpecError(field, message)


def validate_check_spec(spec: Any, where: str = "check") -> None:
    """Raise ``CheckSpecError`` naming the first field of ``spec`` that is wrong."""
    _require(isinstance(spec, dict), where, "must be an object with a 'type'")
    kind = spec.get("type")
    _require(
        isinstance(kind, str) and kind in SPEC_FIELDS,
        f"{where}.type",
        f"must be one of {', '.join(SPEC_FIELDS)}",
    )
    required, optional = SPEC_FIELDS[kind]
    for key in sorted(required - spec.keys()):
        raise CheckSpecError(f"{where}.{key}", f"is required for a {kind} check")
    for key in sorted(spec.keys() - required - optional - {"type", "label"}):
        raise CheckSpecError(f"{where}.{key}", f"is not a field of a {kind} check")
    if "label" in spec:
        _require(isinstance(spec["label"], str) and spec["label"], f"{where}.label", "must be text")
    for key in ("allow_fences", "fullmatch", "case_sensitive", "expected"):
        if key in spec:
            _require(isinstance(spec[key], bool), f"{where}.{key}", "must be true or false")
    if kind == "json_schema":
        _check_schema(spec["schema"], f"{where}.schema")
    elif kind == "regex":
        flags = spec.get("flags", "")
        _require(
            isinstance(flags, str) and set(flags) <= set(_REGEX_FLAGS),
            f"{where}.flags",
            f"must be letters among {''.join(_REGEX_FLAGS)}",
        )
        _require(isinstance(spec["pattern"], str), f"{where}.pattern", "must be text")
        try:
            re.compile(spec["pattern"])
        except re.error as error:
            message = f"invalid regular expression: {error}"
            raise CheckSpecError(f"{where}.pattern", message) from None
    elif kind in ("contains", "not_contains"):
        value = spec["value"]
        _require(isinstance(value, str) and value != "", f"{where}.value", "must be non-empty text")
    elif kind == "refusal" and "markers" in spec:
        markers = spec["markers"]
        _require(
            isinstance(markers, list)
            and markers
            and all(isinstance(m, str) and m for m in markers),
            f"{where}.markers",
            "must be a non-empty list of non-empty texts",
        )
    elif kind == "tool_call":
        if "name" in spec:
            _require(
                isinstance(spec["name"], str) and spec["name"], f"{where}.name", "must be text"
            )
        if "arguments_schema" in spec:
            _check_schema(spec["arguments_schema"], f"{where}.arguments_schema")
    elif kind in ("max_ttft_ms", "max_tpot_ms"):
        value = spec["value"]
        _require(
            isinstance(value, int | float) and not isinstance(value, bool) and value > 0,
            f"{where}.value",
            "must be a positive number of milliseconds",
        )


def validate_check_specs(specs: Any, where: str = "checks") -> None:
    _require(isinstance(specs, list), where, "must be a list of checks")
    for index, spec in enumerate(specs):
        validate_check_spec(spec, f"{where}[{index}]")


# -- evaluation ---------------------------------------------------------------------


def _snippet(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _SNIPPET else text[:_SNIPPET] + "…"


def _schema_error(schema: dict[str, Any], instance: Any) -> str | None:
    """The most relevant violation as ``$.path: message``, or None when valid."""
    import jsonschema

    cls = jsonschema.validators.validator_for(schema)
    validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
    try:
        errors = list(validator.iter_errors(instance))
    except Unresolvable as error:
        return f"the schema has a $ref that cannot be resolved: {error}"
    if not errors:
        return None
    best = jsonschema.exceptions.best_match(errors)
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{best.json_path}: {best.message}{more}"


def _json_schema(spec: dict[str, Any], result: Checked, name: str) -> CheckOutcome:
    expected = "JSON valid against the schema"
    text = result.output_text.strip()
    fenced = _FENCE.match(text)
    if fenced and not spec.get("allow_fences", False):
        return CheckOutcome(
            name,
            False,
            "bare JSON valid against the schema",
            "JSON wrapped in a Markdown code fence",
            'the output starts with ``` ; set "allow_fences": true to accept fenced JSON',
        )
    if fenced:
        text = fenced.group(1).strip()
    try:
        instance = json.loads(text)
    except json.JSONDecodeError as error:
        got = f"not JSON: {error.msg} at line {error.lineno} column {error.colno}"
        return CheckOutcome(name, False, expected, got, f"output: {_snippet(text) or '(empty)'}")
    problem = _schema_error(spec["schema"], instance)
    if problem is not None:
        return CheckOutcome(name, False, expected, problem, f"output: {_snippet(text)}")
    return CheckOutcome(name, True, expected, "valid JSON")


def _regex(spec: dict[str, Any], result: Checked, name: str) -> CheckOutcome:
    flags = 0
    for letter in spec.get("flags", ""):
        flags |= _REGEX_FLAGS[letter]
    pattern = re.compile(spec["pattern"], flags)
    full = spec.get("fullmatch", False)
    expected = f"{'whole output matches' if full else 'matches'} /{spec['pattern']}/"
    found = (pattern.fullmatch if full else pattern.search)(result.output_text)
    if found is None:
        return CheckOutcome(name, False, expected, f"no match in: {_snippet(result.output_text)}")
    return CheckOutcome(name, True, expected, f"matched {_snippet(found.group(0))!r}")


def _find(spec: dict[str, Any], text: str) -> int:
    value = spec["value"]
    if spec.get("case_sensitive", True):
        return text.find(value)
    return text.casefold().find(value.casefold())


def _contains(spec: dict[str, Any], result: Checked, name: str) -> CheckOutcome:
    expected = f"output contains {spec['value']!r}"
    at = _find(spec, result.output_text)
    if at < 0:
        return CheckOutcome(name, False, expected, f"not found in: {_snippet(result.output_text)}")
    return CheckOutcome(name, True, expected, f"found at character {at}")


def _not_contains(spec: dict[str, Any], result: Checked, name: str) -> CheckOutcome:
    expected = f"output does not contain {spec['value']!r}"
    text = result.output_text
    at = _find(spec, text)
    if at < 0:
        return CheckOutcome(name, True, expected, "not found")
    around = _snippet(text[max(at - 40, 0) : at + len(spec["value"]) + 40])
    return CheckOutcome(name, False, expected, f"found at character {at}: …{around}…")


def _normalize(text: str) -> str:
    return text.casefold().replace("\u2019", "'").replace("\u2018", "'")


def _refusal(spec: dict[str, Any], result: Checked, name: str) -> CheckOutcome:
    markers = spec.get("markers") or DEFAULT_REFUSAL_MARKERS
    wanted = spec.get("expected", True)
    text = _normalize(result.output_text)
    marker = next((m for m in markers if _normalize(m) in text), None)
    expected = "a refusal" if wanted else "not a refusal"
    got = f"refusal marker {marker!r} found" if marker else "no refusal marker"
    detail = "" if (marker is not None) == wanted else f"output: {_snippet(result.output_text)}"
    return CheckOutcome(name, (marker is not None) == wanted, expected, got, detail)


def _tool_call(spec: dict[str, Any], result: Checked, name: str) -> CheckOutcome:
    wanted = spec.get("name")
    expected = f"a call to {wanted}" if wanted else "a tool call"
    if "arguments_schema" in spec:
        expected += " with arguments valid against the schema"
    calls = list(result.tool_calls)
    matching = [c for c in calls if wanted is None or c.name == wanted]
    if not matching:
        got = f"calls to {', '.join(c.name for c in calls)}" if calls else "no tool call"
        detail = f"output: {_snippet(result.output_text)}" if result.output_text else ""
        return CheckOutcome(name, False, expected, got, detail)
    schema = spec.get("arguments_schema")
    if schema is None:
        return CheckOutcome(name, True, expected, f"call to {matching[0].name}")
    problems = []
    for call in matching:
        try:
            arguments = json.loads(call.arguments)
        except json.JSONDecodeError as error:
            problems.append(f"{call.name} arguments are not JSON: {error.msg}")
            continue
        problem = _schema_error(schema, arguments)
        if problem is None:
            return CheckOutcome(name, True, expected, f"call to {call.name}, arguments valid")
        problems.append(f"{call.name} arguments {problem}")
    detail = "; ".join(f"arguments: {_snippet(c.arguments)}" for c in matching)
    return CheckOutcome(name, False, expected, "; ".join(problems), detail)


def _bound(spec: dict[str, Any], measured: float | None, what: str, name: str) -> CheckOutcome:
    expected = f"{what} ≤ {spec['value']} ms"
    if measured is None:
        return CheckOutcome(name, False, expected, f"{what} not measured")
    return CheckOutcome(name, measured <= spec["value"], expected, f"{what} {measured:.1f} ms")


def evaluate_check(spec: dict[str, Any], result: Checked) -> CheckOutcome:
    validate_check_spec(spec)
    kind = spec["type"]
    name = spec.get("label", kind)
    if kind == "json_schema":
        return _json_schema(spec, result, name)
    if kind == "regex":
        return _regex(spec, result, name)
    if kind == "contains":
        return _contains(spec, result, name)
    if kind == "not_contains":
        return _not_contains(spec, result, name)
    if kind == "refusal":
        return _refusal(spec, result, name)
    if kind == "tool_call":
        return _tool_call(spec, result, name)
    if kind == "max_ttft_ms":
        return _bound(spec, result.ttft_ms, "TTFT", name)
    return _bound(spec, result.tpot_ms, "TPOT", name)


def evaluate_checks(specs: Sequence[dict[str, Any]], result: Checked) -> list[CheckOutcome]:
    return [evaluate_check(spec, result) for spec in specs]


def judge(
    result: ReplayResult, specs: Sequence[dict[str, Any]]
) -> tuple[ReplayResult, list[CheckOutcome]]:
    """Evaluate the checks of a successful result; a failed check makes it ``check_failed``.

    A result that already failed (timeout, HTTP error, ...) keeps its own error code and
    gets no check outcomes: there is no complete answer to check.
    """
    if not result.ok:
        return result, []
    outcomes = evaluate_checks(specs, result)
    failed = [o.name for o in outcomes if not o.passed]
    if not failed:
        return result, outcomes
    detail = f"failed checks: {', '.join(failed)}"
    return replace(
        result, outcome="error", error_code="check_failed", error_detail=detail
    ), outcomes


# -- repeats ------------------------------------------------------------------------


@dataclass(frozen=True)
class PassRate:
    attempts: int
    passed: int
    rate: float
    flakiness_budget: float  # the share of attempts allowed to fail
    ok: bool


def pass_rate(
    passed: Sequence[bool],
    *,
    flakiness_budget: float | None = None,
    min_pass_rate: float | None = None,
) -> PassRate:
    """A sample repeated k times passes when no more than ``flakiness_budget`` of them fail.

    The budget is the share of attempts allowed to fail; give it directly or as
    ``min_pass_rate`` (its complement, as ``Sample.min_pass_rate`` stores it); neither
    means no failure is tolerated. With k=5 and a budget of 0.2, one failure is
    tolerated and two are not.
    """
    if not passed:
        raise ValueError("passed: at least one attempt is needed")
    if flakiness_budget is not None and min_pass_rate is not None:
        raise ValueError("give flakiness_budget or min_pass_rate, not both")
    if min_pass_rate is not None:
        if not 0.0 <= min_pass_rate <= 1.0:
            raise ValueError("min_pass_rate: must be between 0 and 1")
        flakiness_budget = 1.0 - min_pass_rate
    budget = flakiness_budget or 0.0
    if not 0.0 <= budget <= 1.0:
        raise ValueError("flakiness_budget: must be between 0 and 1")
    attempts = len(passed)
    good = sum(1 for p in passed if p)
    # The epsilon keeps 29 failures of 100 within a 0.29 budget (0.29 * 100 < 29 in floats).
    ok = attempts - good <= budget * attempts + 1e-9
    return PassRate(attempts, good, good / attempts, budget, ok)
