"""A service's day of run evidence computed from its traces: one row per tenant, task
type and backend, recorded as the gateway's push is, saying it came from traces."""

from __future__ import annotations

import datetime as dt
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from ledger.models import Event, RunSummary, TaskType
from ledger.traces.otlp import Extracted, SpanFacts
from ledger.traces.services import record_spans
from tests.ledger.factories import ServiceFactory

pytestmark = pytest.mark.django_db
YESTERDAY = timezone.now().astimezone(dt.UTC).date() - dt.timedelta(days=1)


@pytest.fixture
def service():
    service = ServiceFactory(slug="kb-traced", tenants=["support", "sales"])
    service.task_types.set(
        [TaskType.objects.get_or_create(slug=t, defaults={"name": t})[0] for t in ("chat", "rag")]
    )
    return service


def span(n: int, *, tenant="support", task_type="chat", **facts) -> SpanFacts:
    started = dt.datetime.combine(YESTERDAY, dt.time(10), tzinfo=dt.UTC) + dt.timedelta(minutes=n)
    return SpanFacts(
        trace_id=f"{n + 1:032x}",
        span_id=f"{n + 1:016x}",
        parent_span_id="",
        name="chat",
        started_at=started,
        duration_ms=facts.pop("duration_ms", 1000.0),
        operation="chat",
        server_address="kb-vllm.internal",
        server_port=8000,
        service_slug="kb-traced",
        tenant=tenant,
        task_type=task_type,
        input_tokens=100,
        output_tokens=facts.pop("output_tokens", 11),
        ttft_ms=facts.pop("ttft_ms", 200.0),
        **facts,
    )


def test_the_day_is_the_spans_per_tenant_task_type_and_backend(service):
    record_spans(
        Extracted(
            spans=[
                span(0),
                span(1, retry_count=2, degradation="shorter-context"),
                span(2, error_type="429", ttft_ms=None, output_tokens=0),
                span(3, tenant="sales", task_type="rag", finish_reasons=["length"]),
                span(4, tenant="someone-new"),  # not the service's: unattributed
            ]
        )
    )

    out = StringIO()
    call_command(
        "summarize_traces", "--date", YESTERDAY.isoformat(), "--service", "kb-traced", stdout=out
    )

    summary = RunSummary.objects.get(service=service, date=YESTERDAY)
    assert summary.source == "gateway" and summary.details == {"from": "traces", "spans": 5}
    assert (summary.requests, summary.input_tokens) == (5, 500)
    assert summary.output_tokens == 11 * 4
    assert summary.error_counts == {"429": 1} and summary.rate_limit_hits == 1
    assert summary.retries == 2 and summary.degradations == {"shorter-context": 1}
    assert summary.ttft_p50_ms == 200.0 and summary.e2e_p99_ms == 1000.0
    rows = {(r.tenant, r.task_type): r for r in summary.breakdown.all()}
    assert set(rows) == {("support", "chat"), ("sales", "rag"), ("unattributed", "chat")}
    support = rows[("support", "chat")]
    assert (support.requests, support.errors_4xx, support.backend) == (
        3,
        1,
        "kb-vllm.internal:8000",
    )
    # TPOT: (1000 - 200) ms over 10 tokens after the first.
    assert support.tpot_p50_ms == pytest.approx(80.0)
    assert rows[("sales", "rag")].truncations == 1
    assert "kb-traced" in out.getvalue() and "recorded, 5 requests in 3 rows" in out.getvalue()
    assert Event.objects.filter(action="run_summary.recorded").count() == 1

    # Again: the same numbers, nothing new.
    call_command("summarize_traces", "--date", YESTERDAY.isoformat(), stdout=StringIO())
    assert Event.objects.filter(action__startswith="run_summary.").count() == 1


def test_a_day_without_spans_records_nothing_and_bad_arguments_are_named(service):
    call_command("summarize_traces", "--date", YESTERDAY.isoformat(), stdout=StringIO())
    assert not RunSummary.objects.exists()
    with pytest.raises(CommandError, match="--date '12/06': expected YYYY-MM-DD"):
        call_command("summarize_traces", "--date", "12/06")
    with pytest.raises(CommandError, match="--service: no service nope"):
        call_command("summarize_traces", "--service", "nope")


def test_what_counts_as_over_a_limit():
    from ledger.traces.otlp import is_limit_error

    for said in ("429", "RateLimitError", "rate_limit_exceeded", "insufficient_quota"):
        assert is_limit_error(said), said
    for said in ("503", "timeout", "context_length_exceeded", ""):
        assert not is_limit_error(said), said
