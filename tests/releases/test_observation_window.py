"""The observation form's default window is never empty, however recently its stage
began (a flaky browser test found one the second a rollout started)."""

from __future__ import annotations

import datetime as dt

import time_machine
from django.utils import timezone

from releases.governance.forms.rollout import ObservationForm


def _window(started: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
    form = ObservationForm(stage_started_at=started)
    return form.initial["window_start"], form.initial["window_end"]


def test_a_stage_begun_this_very_second_gets_a_one_second_window():
    with time_machine.travel(
        dt.datetime(2026, 12, 7, 8, 34, 17, 400_000, tzinfo=dt.UTC), tick=False
    ):
        start, end = _window(timezone.now() - dt.timedelta(milliseconds=300))
    assert end - start == dt.timedelta(seconds=1)


def test_a_stage_begun_earlier_this_minute_ends_its_window_now():
    with time_machine.travel(dt.datetime(2026, 12, 7, 8, 34, 17, tzinfo=dt.UTC), tick=False):
        start, end = _window(timezone.now() - dt.timedelta(seconds=10))
        assert end == timezone.localtime().replace(microsecond=0)
    assert end - start == dt.timedelta(seconds=10)


def test_an_older_stage_takes_the_last_quarter_hour_to_the_minute():
    with time_machine.travel(dt.datetime(2026, 12, 7, 8, 34, 17, tzinfo=dt.UTC), tick=False):
        start, end = _window(timezone.now() - dt.timedelta(hours=2))
    assert end.second == 0 and end - start == dt.timedelta(minutes=15)
