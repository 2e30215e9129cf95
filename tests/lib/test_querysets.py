"""Querysets built once per process and handed out as copies."""

from __future__ import annotations

import pytest
from django.db.models import QuerySet

from ledger.models import Team
from lib.querysets import built_once
from tests.ledger.factories import TeamFactory

pytestmark = pytest.mark.django_db


def test_the_queryset_is_built_once_and_each_call_gets_a_copy():
    builds = []

    @built_once
    def teams() -> QuerySet[Team]:
        builds.append(1)
        return Team.objects.order_by("name")

    first, second = teams(), teams()
    assert len(builds) == 1
    assert first is not second
    assert first.query is not second.query


def test_a_copys_results_do_not_stick_to_the_next_copy():
    @built_once
    def teams() -> QuerySet[Team]:
        return Team.objects.order_by("name")

    TeamFactory(name="alpha")
    assert [t.name for t in teams()] == ["alpha"]
    TeamFactory(name="beta")
    assert [t.name for t in teams()] == ["alpha", "beta"]


def test_a_filter_on_a_copy_leaves_the_kept_queryset_as_it_was():
    @built_once
    def teams() -> QuerySet[Team]:
        return Team.objects.order_by("name")

    TeamFactory(name="alpha")
    TeamFactory(name="beta")
    assert [t.name for t in teams().filter(name="beta")] == ["beta"]
    assert [t.name for t in teams()] == ["alpha", "beta"]
