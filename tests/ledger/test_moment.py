"""`{% moment %}` writes what the two `date` filters it replaces wrote."""

import datetime as dt
import zoneinfo

import pytest
from django.template import engines
from django.utils import timezone, translation

FILTERS = engines["django"].from_string(
    """<time datetime="{{ value|date:'c' }}">{{ value|date:"Y-m-d H:i T" }}</time>"""
)
TAG = engines["django"].from_string("{% load ledger_format %}{% moment value %}")

MOMENTS = [
    dt.datetime(2026, 12, 3, 18, 20, 5, 123456, tzinfo=dt.UTC),
    dt.datetime(2026, 1, 1, 0, 0, tzinfo=dt.UTC),  # no seconds, no microseconds
    dt.datetime(2026, 7, 1, 23, 59, 59, tzinfo=zoneinfo.ZoneInfo("America/New_York")),
    dt.datetime(2026, 3, 29, 1, 30, tzinfo=dt.UTC),  # Berlin's clocks jump this night
]


@pytest.mark.parametrize("reader_zone", ["UTC", "Asia/Shanghai", "Europe/Berlin"])
@pytest.mark.parametrize("value", MOMENTS, ids=lambda value: value.isoformat())
def test_moment_writes_what_the_date_filters_wrote(value, reader_zone):
    with timezone.override(zoneinfo.ZoneInfo(reader_zone)), translation.override("zh-hans"):
        assert TAG.render({"value": value}) == FILTERS.render({"value": value})


def test_a_naive_moment_is_named_in_the_default_zone():
    naive = dt.datetime(2026, 5, 4, 3, 2, 1)
    assert TAG.render({"value": naive}) == FILTERS.render({"value": naive})


@pytest.mark.parametrize("value", [None, "", "2026-12-03", dt.date(2026, 12, 3)])
def test_no_moment_writes_nothing(value):
    assert TAG.render({"value": value}) == ""
