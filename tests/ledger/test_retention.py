"""Request-level load-test data past retention is dropped; the report and the chain stay."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.utils import timezone

from ledger.chain import verify_chain
from ledger.models import Event, LoadTestRequestData
from ledger.services.retention import purge_expired_request_data
from tests.ledger.evidence.conftest import import_file

pytestmark = pytest.mark.django_db


@pytest.fixture
def revision():
    from tests.ledger.evidence.conftest import sample_asset, sample_runtime
    from tests.ledger.factories import RevisionFactory, TeamFactory

    team = TeamFactory()
    return RevisionFactory(
        model_asset=sample_asset(team), runtime=sample_runtime(team), service__team=team
    )


def test_request_data_past_retention_is_dropped_and_recorded(revision, settings):
    settings.RETENTION_RAW_DAYS = 183
    now = timezone.now()
    with time_machine.travel(now - dt.timedelta(days=200), tick=False):
        old, _ = import_file(revision, "vllm", "vllm_c2_n20_detailed.json", workload="short")
    recent, _ = import_file(revision, "generic", "requests.jsonl", workload="batch")
    assert old.has_request_data and recent.has_request_data

    assert purge_expired_request_data(actor=None, now=now) == 1

    old.refresh_from_db()
    recent.refresh_from_db()
    assert not old.has_request_data and recent.has_request_data
    assert not LoadTestRequestData.objects.filter(report=old).exists()
    assert old.ttft_p95_ms is not None  # the summary stays
    event = Event.objects.order_by("-sequence").first()
    assert event.action == "retention.request_data_purged"
    assert event.payload_data["reports"] == [old.pk]
    assert verify_chain().ok
    assert purge_expired_request_data(actor=None, now=now) == 0
