"""Durations read in words, in the reader's language: the one helper every page uses."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import translation

from lib.durations import in_words, minutes_in_words


@pytest.mark.parametrize(
    ("delta", "words"),
    [
        (dt.timedelta(seconds=40), "40 s"),
        (dt.timedelta(minutes=8), "8 min"),
        (dt.timedelta(minutes=65), "1 h 5 min"),
        (dt.timedelta(hours=2), "2 h"),
    ],
)
def test_a_duration_reads_in_words(delta, words):
    assert in_words(delta) == words


def test_minutes_of_a_plan_read_as_a_duration():
    assert minutes_in_words(8) == "8 min"
    assert minutes_in_words(90) == "1 h 30 min"
    assert minutes_in_words(None) == "—"


def test_durations_are_translated():
    with translation.override("zh-hans"):
        assert minutes_in_words(8) == "8 分钟"
        assert in_words(dt.timedelta(minutes=65)) == "1 小时 5 分钟"
        assert in_words(dt.timedelta(seconds=40)) == "40 秒"
