"""Sample sets as JSON Lines: validation by line and field, versions, round trips, starter sets."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from ledger.models import Event
from replay import jsonl, services
from replay.models import Sample, SampleSet
from replay.starters import starter_files

SCHEMA = {"type": "object", "properties": {"total": {"type": "number"}}, "required": ["total"]}


def _line(**fields) -> str:
    base = {
        "key": "capital",
        "category": "short_qa",
        "messages": [{"role": "user", "content": "What is the capital of France?"}],
    }
    return json.dumps({**base, **fields})


def _text(*lines: str) -> str:
    return "\n".join(lines) + "\n"


def test_a_sample_gets_every_field_with_its_defaults():
    [spec] = jsonl.parse_samples(_line())

    assert spec == {
        "key": "capital",
        "category": "short_qa",
        "tags": [],
        "messages": [{"role": "user", "content": "What is the capital of France?"}],
        "params": {},
        "checks": [],
        "repeat": 1,
        "min_pass_rate": 1.0,
        "rerunnable": True,
        "sensitive": False,
        "tool_results": [],
    }


@pytest.mark.parametrize(
    ("line", "error"),
    [
        (
            "{not json",
            "line 2: not JSON: Expecting property name enclosed in double quotes (column 2)",
        ),
        ("[1, 2]", "line 2: a sample must be a JSON object, got a list"),
        (
            _line(key="b", colour="red"),
            "line 2: colour: unknown field; known fields: key, category, tags, messages, params, checks, repeat, min_pass_rate, rerunnable, sensitive, tool_results",
        ),
        (json.dumps({"key": "b", "category": "short_qa"}), "line 2: messages: is required"),
        (_line(key="b c"), "line 2: key: must be 1-100 letters, digits, '-' or '_'"),
        (
            _line(key="b", category="trivia"),
            "line 2: category: must be one of short_qa, long_context, structured_json, tool_call, refusal, long_stream, concurrency_burst",
        ),
        (
            _line(key="b", messages=[{"role": "robot", "content": "hi"}]),
            "line 2: messages[0].role: must be one of system, user, assistant, tool, developer, got 'robot'",
        ),
        (
            _line(key="b", messages=[{"role": "system", "content": "Be brief."}]),
            "line 2: messages: needs at least one user message",
        ),
        (
            _line(key="b", params={"stream": False}),
            "line 2: params.stream: set by the replay client, not by a sample",
        ),
        (
            _line(key="b", params={"max_tokens": 0}),
            "line 2: params.max_tokens: must be a whole number of at least 1",
        ),
        (
            _line(key="b", checks=[{"type": "json_schema", "schema": {"type": "objekt"}}]),
            "line 2: checks[0].schema.type: 'objekt' is not valid under any of the given schemas",
        ),
        (
            _line(key="b", checks=[{"type": "regex", "pattern": "("}]),
            "line 2: checks[0].pattern: invalid regular expression: missing ), unterminated subpattern at position 0",
        ),
        (_line(key="b", repeat=51), "line 2: repeat: must be a whole number from 1 to 50"),
        (_line(key="b", min_pass_rate=1.5), "line 2: min_pass_rate: must be a number from 0 to 1"),
        (_line(key="b", sensitive="yes"), "line 2: sensitive: must be true or false"),
        (_line(), "line 2: key: 'capital' is already used on line 1"),
    ],
)
def test_a_bad_line_is_reported_by_its_number_and_field(line, error):
    with pytest.raises(jsonl.JsonlError) as raised:
        jsonl.parse_samples(_text(_line(), line))

    assert raised.value.errors == [error]


def test_every_bad_line_is_reported_and_blank_lines_are_skipped():
    text = _text(_line(), "", _line(key="b", repeat=0), _line(key="c", category="x"))

    with pytest.raises(jsonl.JsonlError) as raised:
        jsonl.parse_samples(text)

    assert [e.split(":")[0] for e in raised.value.errors] == ["line 3", "line 4"]


def test_an_empty_text_is_refused():
    with pytest.raises(jsonl.JsonlError) as raised:
        jsonl.parse_samples("\n\n")

    assert raised.value.errors == ["line 1: the text holds no samples (one JSON object per line)"]


def test_dump_leaves_out_defaults_and_orders_keys_and_samples():
    specs = jsonl.parse_samples(
        _text(
            _line(key="z", repeat=3),
            _line(key="a", checks=[{"type": "contains", "value": "Paris"}]),
        )
    )

    dumped = jsonl.dump_samples(specs)

    assert dumped.splitlines() == [
        '{"key": "a", "category": "short_qa", "messages": [{"role": "user", "content": '
        '"What is the capital of France?"}], "checks": [{"type": "contains", "value": "Paris"}]}',
        '{"key": "z", "category": "short_qa", "messages": [{"role": "user", "content": '
        '"What is the capital of France?"}], "repeat": 3}',
    ]
    assert jsonl.parse_samples(dumped) == sorted(specs, key=lambda s: s["key"])


def test_the_content_digest_ignores_order_and_formatting():
    one = jsonl.parse_samples(_text(_line(key="a"), _line(key="b")))
    other = jsonl.parse_samples(
        _text(
            _line(key="b"),
            json.dumps(json.loads(_line(key="a")), indent=None, separators=(",", ":")),
        )
    )

    assert jsonl.content_digest(one) == jsonl.content_digest(other)
    changed = jsonl.parse_samples(_text(_line(key="a"), _line(key="b", repeat=2)))
    assert jsonl.content_digest(changed) != jsonl.content_digest(one)


@pytest.mark.parametrize("path", starter_files(), ids=lambda p: p.stem)
def test_every_starter_set_is_valid_and_of_its_own_category(path):
    specs = jsonl.parse_samples(path.read_text(encoding="utf-8"))

    assert {spec["category"] for spec in specs} == {path.stem}
    assert all(spec["checks"] for spec in specs)


def test_the_starter_sets_cover_every_category():
    assert sorted(p.stem for p in starter_files()) == sorted(jsonl.CATEGORIES)


# -- importing and exporting through the domain --------------------------------------


@pytest.mark.django_db
def test_import_makes_version_one_with_an_event_and_export_round_trips():
    text = _text(
        _line(key="b", sensitive=True, checks=[{"type": "json_schema", "schema": SCHEMA}]),
        _line(key="a", repeat=3, min_pass_rate=0.67, tags=["geo"], rerunnable=False),
    )

    sample_set, created = services.import_sample_set(
        actor=None, name="kb-smoke", jsonl=text, description="The basics."
    )

    assert created and (sample_set.name, sample_set.version) == ("kb-smoke", 1)
    a = sample_set.samples.get(key="a")
    assert (a.repeat, a.min_pass_rate, a.tags, a.rerunnable) == (3, 0.67, ["geo"], False)
    event = Event.objects.get(action="replay.sample_set_imported")
    assert event.payload_data["keys"] == ["a", "b"] and event.payload_data["version"] == 1
    exported = services.export_sample_set(sample_set)
    assert jsonl.parse_samples(exported) == sorted(
        jsonl.parse_samples(text), key=lambda s: s["key"]
    )
    again, created_again = services.import_sample_set(actor=None, name="kb-smoke", jsonl=exported)
    assert (again, created_again) == (sample_set, False)


@pytest.mark.django_db
def test_changing_one_sample_makes_version_two_and_an_identical_import_makes_nothing():
    first, _ = services.import_sample_set(
        actor=None, name="kb-smoke", jsonl=_text(_line(key="a"), _line(key="b"))
    )
    events = Event.objects.count()

    same, created = services.import_sample_set(
        actor=None, name="kb-smoke", jsonl=_text(_line(key="b"), "", _line(key="a"))
    )
    assert (same, created) == (first, False)
    assert Event.objects.count() == events

    second, created = services.import_sample_set(
        actor=None, name="kb-smoke", jsonl=_text(_line(key="a"), _line(key="b", repeat=2))
    )
    assert created and second.version == 2
    assert first.samples.get(key="b").repeat == 1  # the old version is kept as it was
    assert services.get_sample_set("kb-smoke") == second
    assert services.get_sample_set("kb-smoke", 1) == first
    assert (
        Event.objects.get(
            action="replay.sample_set_imported", subject_id=str(second.pk)
        ).payload_data["previous_version"]
        == 1
    )


@pytest.mark.django_db
def test_a_bad_import_names_each_line_and_writes_nothing():
    text = _text(
        _line(key="a"), _line(key="b", checks=[{"type": "json_schema", "schema": {"type": 3}}])
    )

    with pytest.raises(ValidationError) as raised:
        services.import_sample_set(actor=None, name="kb-smoke", jsonl=text)

    assert raised.value.message_dict == {
        "jsonl": ["line 2: checks[0].schema.type: 3 is not valid under any of the given schemas"]
    }
    assert not SampleSet.objects.exists() and not Sample.objects.exists()


@pytest.mark.django_db
def test_a_bad_name_and_undecodable_bytes_are_refused():
    with pytest.raises(ValidationError) as raised:
        services.import_sample_set(actor=None, name="kb smoke!", jsonl=_line())
    assert "name" in raised.value.message_dict

    with pytest.raises(ValidationError) as raised:
        services.import_sample_set(actor=None, name="kb", jsonl=b"\xff\xfe{")
    assert raised.value.message_dict["jsonl"][0].startswith("the file is not UTF-8 text")


@pytest.mark.django_db
def test_model_owners_and_sres_import_sets_and_others_may_not(owner, sre, auditor):
    with pytest.raises(PermissionDenied):
        services.import_sample_set(actor=auditor, name="kb", jsonl=_line())

    by_owner, _ = services.import_sample_set(actor=owner, name="kb", jsonl=_line())
    by_sre, _ = services.import_sample_set(actor=sre, name="kb", jsonl=_line(repeat=2))

    assert (by_owner.created_by, by_sre.created_by, by_sre.version) == (owner, sre, 2)
