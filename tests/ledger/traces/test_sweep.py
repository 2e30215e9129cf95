"""Spans live in day partitions on PostgreSQL; the daily sweep drops the days past
RETENTION_TRACES_DAYS whole and says so in one Event."""

from __future__ import annotations

import datetime as dt

import orjson
import pytest
from django.db import connection
from django.utils import timezone
from rest_framework.authtoken.models import Token

from ledger.models import Event, ModelCallSpan
from ledger.traces import partitions
from ledger.traces.services import sweep_traces
from tests.factories import UserFactory
from tests.ledger.traces.helpers import export, model_call

pytestmark = pytest.mark.django_db


def _send(client, *calls):
    user = UserFactory(roles=["trace_ingest"])
    key = Token.objects.create(user=user).key
    response = client.post(
        "/api/otlp/v1/traces",
        orjson.dumps(export(*calls)),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Token {key}",
    )
    assert response.status_code == 200, response.content


def test_each_day_gets_its_partition_and_the_sweep_drops_the_old_ones(client, settings):
    assert connection.vendor == "postgresql"
    settings.RETENTION_TRACES_DAYS = 30
    now = timezone.now()
    days_ago = [0, 29, 31]  # kept, kept, past retention once the setting shrinks
    settings.RETENTION_TRACES_DAYS = 400
    _send(
        client,
        *(
            model_call(span_id=f"{n + 1:016x}", started=now - dt.timedelta(days=ago))
            for n, ago in enumerate(days_ago)
        ),
    )
    made = partitions.existing()
    assert {now.date() - dt.timedelta(days=ago) for ago in days_ago} <= set(made)
    # The rows are in their day's table.
    with connection.cursor() as cursor:
        oldest = partitions.name_of((now - dt.timedelta(days=31)).date())
        cursor.execute(f'SELECT count(*) FROM "{oldest}"')  # noqa: S608 - a date's digits
        assert cursor.fetchone()[0] == 1

    settings.RETENTION_TRACES_DAYS = 30
    result = sweep_traces(actor=None, now=now)

    old_day = (now - dt.timedelta(days=31)).astimezone(dt.UTC).date()
    assert old_day.isoformat() in result["partitions_dropped"]
    assert old_day not in partitions.existing()
    assert ModelCallSpan.objects.count() == 2
    event = Event.objects.get(action="retention.traces_swept")
    assert event.payload_data["retention_days"] == 30
    assert old_day.isoformat() in event.payload_data["partitions_dropped"]


def test_a_sweep_with_nothing_to_drop_is_still_recorded():
    result = sweep_traces(actor=None)
    assert result["partitions_dropped"] == []
    assert Event.objects.filter(action="retention.traces_swept").count() == 1
