"""seed_demo's run evidence: 60 days per live demo service, one visible drift, once."""

from __future__ import annotations

import datetime as dt
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from ledger import queries
from ledger.chain import verify_chain
from ledger.demo.run_evidence import DAYS, DRIFT_DAYS, QUOTA_DAYS, demo_days
from ledger.models import Event, RunBreakdown, RunSummary, Service, TaskType
from ledger.services import record_run_summary
from tests.ledger.factories import ServiceFactory

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


def test_the_demo_days_pass_the_verbs_checks_and_one_tenant_is_near_its_quota():
    """Through the verb: every breakdown row is the service's own and adds up to the day;
    field-service takes the day's 429s on 5 of the last 7 days, nobody else is limited;
    r3's shorter answers are a step down in output tokens per request."""
    today = timezone.now().astimezone(dt.UTC).date()
    service = ServiceFactory(
        slug="kb-assistant", slo_ttft_p95_ms=800, tenants=["support", "sales", "field-service"]
    )
    service.task_types.set(
        [TaskType.objects.get_or_create(slug=s, name=s)[0] for s in ("chat", "rag")]
    )
    for date, fields, _ in demo_days(service, today=today):
        record_run_summary(service, actor=None, date=date, **fields)

    limited = RunBreakdown.objects.filter(
        summary__service=service,
        summary__date__gte=today - dt.timedelta(days=7),
        rate_limit_hits__gt=0,
    )
    assert set(limited.exclude(tenant="unattributed").values_list("tenant", flat=True)) == {
        "field-service"
    }
    pressed_days = limited.filter(tenant="field-service").values("summary__date").distinct()
    assert pressed_days.count() == QUOTA_DAYS
    days = list(RunSummary.objects.filter(service=service).order_by("date"))
    per_request = [day.output_tokens / day.requests for day in days]
    before, after = per_request[: DAYS - DRIFT_DAYS], per_request[DAYS - DRIFT_DAYS :]
    assert max(after) < min(before)
    assert all(day.breakdown.count() == 3 * 2 + 1 for day in days)


def test_the_fleet_gets_its_days_in_bulk_with_their_events():
    output = _seed("--scale", "2")

    fleet = RunSummary.objects.filter(service__slug__startswith="fleet-")
    assert fleet.count() == 2 * DAYS
    assert Event.objects.filter(action="run_summary.recorded").count() >= 2 * DAYS
    assert "run evidence added for 2 services" in output
    assert verify_chain().ok
    assert "run evidence added for 0 services" in _seed("--scale", "2")
