"""The list fields pages type as text: words by commas, or one item a line."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.core.validators import validate_slug

from lib.forms import CommaListField, LinesField


def test_a_comma_list_drops_blanks_and_repeats_and_shows_back_as_typed():
    field = CommaListField()
    assert field.clean(" chat, rag,, chat ,sql ") == ["chat", "rag", "sql"]
    assert field.clean("") == []
    assert field.prepare_value(["chat", "rag"]) == "chat, rag"


def test_lines_keep_every_line_in_order_so_a_line_number_names_it():
    field = LinesField()
    typed = "p95 TTFT above 1200 ms\n\n  error rate above 1 %  \np95 TTFT above 1200 ms\r\n"
    assert field.clean(typed) == [
        "p95 TTFT above 1200 ms",
        "error rate above 1 %",
        "p95 TTFT above 1200 ms",
    ]
    assert field.prepare_value(["one", "two"]) == "one\ntwo"
    assert field.clean("one, two") == ["one, two"]  # commas are part of a line


def test_a_required_list_and_an_item_validator_refuse_with_the_item_named():
    with pytest.raises(ValidationError):
        CommaListField(required=True).clean(" , ")
    with pytest.raises(ValidationError) as refused:
        CommaListField(item_validator=validate_slug).clean("chat, Not A Slug")
    assert refused.value.messages == [
        "'Not A Slug': use lowercase letters, digits and hyphens, e.g. chat, rag, sql."
    ]
