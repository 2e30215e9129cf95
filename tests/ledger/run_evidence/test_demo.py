"""seed_demo's run evidence: 60 days per live demo service, one visible drift, once."""

from __future__ import annotations

import datetime as dt
from io import StringIO

import pytest
from django.core.management import call_command

from ledger import queries
from ledger.chain import verify_chain
from ledger.demo.run_evidence import DAYS, DRIFT_DAYS, demo_days
from ledger.models import Event, RunSummary, Service
from ledger.services import clean_run_summary

pytestmark = pytest.mark.django_db


def _seed(*args: str) -> str:
    out = StringIO()
    call_command("seed_demo", "--quiet-logins", *args, stdout=out)
    return out.getvalue()


def test_every_live_demo_service_gets_60_days_once_and_kb_assistant_drifts():
    _seed()

    live = Service.objects.filter(live_revision__isnull=False).exclude(slug__startswith="fleet-")
    for service in live:
        assert service.run_summaries.count() == DAYS, service.slug
    kb = Service.objects.get(slug="kb-assistant")
    trend = queries.run_trend(kb)
    p95 = [p["ttft_p95_ms"] for p in trend["points"]]
    # Before r3 served: well within the 800 ms SLO; the last days: over it.
    assert max(p95[: DAYS - DRIFT_DAYS]) < kb.slo_ttft_p95_ms
    assert all(value > kb.slo_ttft_p95_ms for value in p95[-5:])
    assert {"kind": "served revision", "label": "r3 serving"}.items() <= next(
        m for m in trend["markers"] if m["kind"] == "served revision"
    ).items()
    steady = queries.run_trend(Service.objects.get(slug="dataagent-sql"))
    assert not any(p["ttft_breached"] for p in steady["points"])

    # Seeding again the same day records nothing.
    events = Event.objects.count()

    _seed()

    assert Event.objects.count() == events
    assert verify_chain().ok


def test_the_demo_days_pass_the_verbs_checks():
    service = Service(slug="kb-assistant", slo_ttft_p95_ms=800)
    for date, fields, _ in demo_days(service, today=dt.date(2026, 6, 1)):
        clean_run_summary(fields, date=date, source="gateway", require_requests=True)


def test_the_fleet_gets_its_days_in_bulk_with_their_events():
    output = _seed("--scale", "2")

    fleet = RunSummary.objects.filter(service__slug__startswith="fleet-")
    assert fleet.count() == 2 * DAYS
    assert Event.objects.filter(action="run_summary.recorded").count() >= 2 * DAYS
    assert "run evidence added for 2 services" in output
    assert verify_chain().ok
    assert "run evidence added for 0 services" in _seed("--scale", "2")
