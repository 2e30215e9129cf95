"""PromQL label matchers as a backend states them: read, refused by position, written."""

from __future__ import annotations

import pytest

from lib.promql import Matcher, MatcherError, parse_matchers, quoted


def test_a_matcher_list_is_read_with_or_without_braces():
    assert parse_matchers('{model_name="kb-live"}') == [Matcher("model_name", "=", "kb-live")]
    assert parse_matchers(' job = "vllm" , instance=~"10\\\\.0\\\\.0\\\\.5:.*" ') == [
        Matcher("job", "=", "vllm"),
        Matcher("instance", "=~", "10\\\\.0\\\\.0\\\\.5:.*"),
    ]


def test_each_matcher_writes_itself_as_promql_reads_it():
    matchers = parse_matchers('job="vllm",model_name!="kb-old"')

    assert [str(m) for m in matchers] == ['job="vllm"', 'model_name!="kb-old"']


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "no matcher"),
        ("{}", "no matcher"),
        ('{model_name="kb"', 'must close with "}"'),
        ('1abc="x"', "character 1: expected a label name"),
        ('model_name:"x"', "character 11: expected =, !=, =~ or !~ after model_name"),
        ("model_name=kb", "character 12: expected a value in double quotes"),
        ('job="a" model="b"', 'character 9: expected "," between matchers'),
        ('job=~".*"', "at least one matcher must be an equality with a value"),
        (",".join(f'l{i}="v"' for i in range(9)), "at most 8 matchers"),
    ],
)
def test_a_bad_matcher_list_says_what_was_expected_where(text, expected):
    with pytest.raises(MatcherError, match=expected.replace("(", r"\(").replace("}", r"\}")):
        parse_matchers(text)


def test_a_value_is_quoted_for_promql():
    assert quoted('a"b\\c') == 'a\\"b\\\\c'
