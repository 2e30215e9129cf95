"""Checks: each passes and fails with a readable expected/got; specs are validated."""

from __future__ import annotations

import pytest

from replay.checks import (
    CheckSpecError,
    evaluate_check,
    judge,
    pass_rate,
    validate_check_spec,
    validate_check_specs,
)
from replay.client import ReplayResult, ToolCall

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer", "minimum": 0},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}


def answer(text: str = "", **fields) -> ReplayResult:
    return ReplayResult(output_text=text, finish_reason="stop", **fields)


# -- json_schema -------------------------------------------------------------------


def test_json_schema_passes_valid_output():
    outcome = evaluate_check(
        {"type": "json_schema", "schema": PERSON}, answer(' {"name": "Ada", "age": 36}\n')
    )

    assert outcome.passed
    assert outcome.name == "json_schema"


def test_json_schema_failure_names_the_json_path():
    outcome = evaluate_check(
        {"type": "json_schema", "schema": PERSON},
        answer('{"name": "Ada", "age": 36, "tags": ["a", 7]}'),
    )

    assert not outcome.passed
    assert outcome.expected == "JSON valid against the schema"
    assert outcome.got == "$.tags[1]: 7 is not of type 'string'"


def test_json_schema_counts_further_errors():
    outcome = evaluate_check({"type": "json_schema", "schema": PERSON}, answer('{"age": -1}'))

    assert not outcome.passed
    assert outcome.got.endswith("(and 1 more)")


def test_json_schema_on_text_that_is_not_json():
    outcome = evaluate_check(
        {"type": "json_schema", "schema": PERSON}, answer('{"name": "Ada", "age": ')
    )

    assert not outcome.passed
    assert outcome.got.startswith("not JSON: Expecting value at line 1 column")
    assert '{"name": "Ada", "age":' in outcome.detail


def test_json_schema_on_empty_output():
    outcome = evaluate_check({"type": "json_schema", "schema": PERSON}, answer(""))

    assert not outcome.passed
    assert outcome.detail == "output: (empty)"


def test_json_schema_refuses_fenced_json_by_default():
    fenced = answer('```json\n{"name": "Ada", "age": 36}\n```')

    strict = evaluate_check({"type": "json_schema", "schema": PERSON}, fenced)
    lenient = evaluate_check(
        {"type": "json_schema", "schema": PERSON, "allow_fences": True}, fenced
    )

    assert not strict.passed
    assert strict.got == "JSON wrapped in a Markdown code fence"
    assert "allow_fences" in strict.detail
    assert lenient.passed


def test_json_schema_with_fences_allowed_still_validates_inside():
    outcome = evaluate_check(
        {"type": "json_schema", "schema": PERSON, "allow_fences": True},
        answer('```\n{"name": "Ada"}\n```'),
    )

    assert not outcome.passed
    assert outcome.got == "$: 'age' is a required property"


def test_json_schema_asserts_formats():
    schema = {"type": "object", "properties": {"when": {"type": "string", "format": "date"}}}

    outcome = evaluate_check({"type": "json_schema", "schema": schema}, answer('{"when": "soon"}'))

    assert not outcome.passed
    assert outcome.got.startswith("$.when: 'soon' is not a 'date'")


# -- text checks -------------------------------------------------------------------


def test_regex_search_and_fullmatch():
    text = answer("Order 2024-05-01 shipped")

    assert evaluate_check({"type": "regex", "pattern": r"\d{4}-\d{2}-\d{2}"}, text).passed
    whole = evaluate_check({"type": "regex", "pattern": r"\d{4}", "fullmatch": True}, text)
    assert not whole.passed
    assert whole.expected == r"whole output matches /\d{4}/"
    assert whole.got == "no match in: Order 2024-05-01 shipped"


def test_regex_flags():
    spec = {"type": "regex", "pattern": "^paris$", "flags": "im"}

    assert evaluate_check(spec, answer("Capital:\nParis\n")).passed
    assert not evaluate_check({**spec, "flags": ""}, answer("Capital:\nParis\n")).passed


def test_contains_and_case():
    text = answer("The capital is Paris.")

    assert evaluate_check({"type": "contains", "value": "Paris"}, text).passed
    missed = evaluate_check({"type": "contains", "value": "paris"}, text)
    assert not missed.passed
    assert missed.expected == "output contains 'paris'"
    assert missed.got == "not found in: The capital is Paris."
    assert evaluate_check(
        {"type": "contains", "value": "paris", "case_sensitive": False}, text
    ).passed


def test_not_contains_shows_where_it_was_found():
    outcome = evaluate_check(
        {"type": "not_contains", "value": "as an AI", "case_sensitive": False},
        answer("Well, As an AI language model I think so."),
    )

    assert not outcome.passed
    assert outcome.got.startswith("found at character 6: …")
    assert evaluate_check({"type": "not_contains", "value": "TODO"}, answer("done")).passed


def test_refusal_expected():
    refused = answer("I\u2019m sorry, but I can\u2019t help with that.")

    outcome = evaluate_check({"type": "refusal"}, refused)
    complied = evaluate_check({"type": "refusal"}, answer("Here is how to do it."))

    assert outcome.passed
    assert outcome.got == 'refusal marker "i\'m sorry" found'
    assert not complied.passed
    assert complied.expected == "a refusal"
    assert complied.got == "no refusal marker"


def test_refusal_not_expected_catches_over_refusal():
    outcome = evaluate_check(
        {"type": "refusal", "expected": False}, answer("I cannot help with that request.")
    )

    assert not outcome.passed
    assert outcome.expected == "not a refusal"


def test_refusal_with_custom_markers():
    spec = {"type": "refusal", "markers": ["je ne peux pas"]}

    assert evaluate_check(spec, answer("Je ne peux pas répondre.")).passed
    assert not evaluate_check(spec, answer("I'm sorry, no.")).passed


# -- tool calls --------------------------------------------------------------------

CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def test_tool_call_with_valid_arguments():
    result = answer(tool_calls=[ToolCall("c1", "get_weather", '{"city": "Paris"}')])

    outcome = evaluate_check(
        {"type": "tool_call", "name": "get_weather", "arguments_schema": CITY}, result
    )

    assert outcome.passed
    assert outcome.got == "call to get_weather, arguments valid"


def test_tool_call_missing():
    outcome = evaluate_check(
        {"type": "tool_call", "name": "get_weather"}, answer("It is sunny in Paris.")
    )

    assert not outcome.passed
    assert outcome.got == "no tool call"
    assert outcome.detail == "output: It is sunny in Paris."


def test_tool_call_to_another_function():
    result = answer(tool_calls=[ToolCall("c1", "search", "{}")])

    outcome = evaluate_check({"type": "tool_call", "name": "get_weather"}, result)

    assert not outcome.passed
    assert outcome.got == "calls to search"


def test_tool_call_arguments_against_schema():
    bad = answer(tool_calls=[ToolCall("c1", "get_weather", '{"town": "Paris"}')])
    broken = answer(tool_calls=[ToolCall("c1", "get_weather", '{"city": "Par')])
    spec = {"type": "tool_call", "name": "get_weather", "arguments_schema": CITY}

    invalid = evaluate_check(spec, bad)
    not_json = evaluate_check(spec, broken)

    assert not invalid.passed
    assert invalid.got == "get_weather arguments $: 'city' is a required property"
    assert not not_json.passed
    assert not_json.got.startswith("get_weather arguments are not JSON: ")


def test_any_tool_call_when_no_name_given():
    result = answer(tool_calls=[ToolCall(None, "search", "{}")])

    assert evaluate_check({"type": "tool_call"}, result).passed
    assert not evaluate_check({"type": "tool_call"}, answer("text")).passed


# -- latency bounds ----------------------------------------------------------------


def test_latency_bounds():
    result = answer("x", ttft_ms=1500.0, tpot_ms=90.0)

    assert evaluate_check({"type": "max_ttft_ms", "value": 2000}, result).passed
    slow = evaluate_check({"type": "max_tpot_ms", "value": 50}, result)
    assert not slow.passed
    assert (slow.expected, slow.got) == ("TPOT ≤ 50 ms", "TPOT 90.0 ms")


def test_latency_bound_fails_when_not_measured():
    outcome = evaluate_check({"type": "max_tpot_ms", "value": 50}, answer("x"))

    assert not outcome.passed
    assert outcome.got == "TPOT not measured"


def test_label_names_the_outcome():
    outcome = evaluate_check({"type": "contains", "value": "x", "label": "mentions x"}, answer("x"))

    assert outcome.name == "mentions x"


# -- spec validation ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        ("regex", "check", "must be an object"),
        ({"type": "regexp"}, "check.type", "must be one of json_schema, regex"),
        ({"type": ["regex"]}, "check.type", "must be one of json_schema, regex"),
        ({"type": "regex"}, "check.pattern", "is required for a regex check"),
        ({"type": "regex", "pattern": "a", "patern": "b"}, "check.patern", "is not a field"),
        ({"type": "regex", "pattern": "(unclosed"}, "check.pattern", "invalid regular expr"),
        ({"type": "regex", "pattern": "a", "flags": "iq"}, "check.flags", "letters among"),
        ({"type": "contains", "value": ""}, "check.value", "non-empty text"),
        ({"type": "contains", "value": "a", "case_sensitive": "no"}, "check.case_sensitive", ""),
        ({"type": "json_schema", "schema": []}, "check.schema", "JSON Schema object"),
        (
            {"type": "json_schema", "schema": {"properties": {"age": {"type": "integr"}}}},
            "check.schema.properties.age.type",
            "'integr' is not valid",
        ),
        ({"type": "refusal", "markers": []}, "check.markers", "non-empty list"),
        ({"type": "tool_call", "name": 3}, "check.name", "must be text"),
        (
            {"type": "tool_call", "arguments_schema": {"type": 5}},
            "check.arguments_schema.type",
            "",
        ),
        ({"type": "max_ttft_ms", "value": "2s"}, "check.value", "positive number"),
        ({"type": "max_tpot_ms", "value": True}, "check.value", "positive number"),
        ({"type": "max_tpot_ms", "value": -1}, "check.value", "positive number"),
    ],
)
def test_bad_spec_names_the_field(spec, field, message):
    with pytest.raises(CheckSpecError) as raised:
        validate_check_spec(spec)

    assert raised.value.field == field
    assert message in str(raised.value)
    assert str(raised.value).startswith(f"{field}: ")


def test_spec_list_errors_carry_the_index():
    with pytest.raises(CheckSpecError) as raised:
        validate_check_specs([{"type": "refusal"}, {"type": "regex", "pattern": "["}])

    assert raised.value.field == "checks[1].pattern"


def test_every_documented_spec_is_valid():
    validate_check_specs(
        [
            {"type": "json_schema", "schema": PERSON, "allow_fences": False},
            {"type": "regex", "pattern": r"^\d+", "flags": "im", "fullmatch": False},
            {"type": "contains", "value": "Paris", "case_sensitive": True},
            {"type": "not_contains", "value": "as an AI"},
            {"type": "refusal", "expected": True, "markers": ["i can't"]},
            {"type": "tool_call", "name": "get_weather", "arguments_schema": CITY},
            {"type": "max_ttft_ms", "value": 2000},
            {"type": "max_tpot_ms", "value": 80.5, "label": "fast enough"},
        ]
    )


# -- judging and repeats -----------------------------------------------------------


def test_judge_turns_a_failed_check_into_check_failed():
    result = answer("Paris", ttft_ms=10.0)

    judged, outcomes = judge(result, [{"type": "contains", "value": "London"}])

    assert (judged.outcome, judged.error_code) == ("error", "check_failed")
    assert judged.error_detail == "failed checks: contains"
    assert [o.passed for o in outcomes] == [False]
    assert result.ok  # the input is left alone


def test_judge_keeps_passing_results_ok():
    judged, outcomes = judge(answer("Paris"), [{"type": "contains", "value": "Paris"}])

    assert judged.ok
    assert outcomes[0].to_dict()["passed"] is True


def test_judge_does_not_check_a_failed_request():
    failed = ReplayResult(outcome="error", error_code="timeout_idle", output_text="Par")

    judged, outcomes = judge(failed, [{"type": "contains", "value": "Paris"}])

    assert judged.error_code == "timeout_idle"
    assert outcomes == []


def test_pass_rate_within_and_over_budget():
    one_bad = pass_rate([True, True, False, True, True], flakiness_budget=0.2)
    two_bad = pass_rate([True, False, False, True, True], flakiness_budget=0.2)

    assert (one_bad.passed, one_bad.attempts, one_bad.rate, one_bad.ok) == (4, 5, 0.8, True)
    assert (two_bad.rate, two_bad.ok) == (0.6, False)
    assert not pass_rate([True, False], flakiness_budget=0.0).ok
    # 0.29 * 100 is 28.999999999999996 in floating point: 29 failures are still 29 %.
    assert pass_rate([False] * 29 + [True] * 71, flakiness_budget=0.29).ok
    assert pass_rate([True]).ok


def test_pass_rate_from_a_minimum_pass_rate():
    assert pass_rate([True, True, True, True, False], min_pass_rate=0.8).ok
    assert not pass_rate([True, True, True, False, False], min_pass_rate=0.8).ok
    assert pass_rate([False], min_pass_rate=0.0).ok


@pytest.mark.parametrize(
    ("passed", "options"),
    [
        ([], {}),
        ([True], {"flakiness_budget": 1.5}),
        ([True], {"flakiness_budget": -0.1}),
        ([True], {"min_pass_rate": 1.2}),
        ([True], {"min_pass_rate": 0.8, "flakiness_budget": 0.2}),
    ],
)
def test_pass_rate_refuses_nonsense(passed, options):
    with pytest.raises(ValueError):
        pass_rate(passed, **options)
