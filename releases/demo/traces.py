"""A demo complaint's trace: three model calls of one request, for *Explain a request*.

Two calls to kb-assistant's live revision (the second retried once and served
degraded) and one the gateway sent to dataagent-sql at an address no registered backend
answers, which the explanation flags. Recorded as ingest records them (the structured
facts only), at seeding time, so they fall within what the chain says was live. Nothing
is added when the trace exists.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any
from urllib.parse import urlsplit

from django.utils import timezone

from ledger.models import Event, ModelCallSpan, Service
from ledger.traces.otlp import Extracted, SpanFacts
from ledger.traces.services import record_spans
from replay.models import Backend

DEMO_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def seed_traces() -> int:
    """The calls added (0 when the trace is there, or kb-assistant has no backend)."""
    if ModelCallSpan.objects.filter(trace_id=DEMO_TRACE).exists():
        return 0
    kb = Service.objects.select_related("live_revision__gateway_policy").get(slug="kb-assistant")
    backend = Backend.objects.filter(revision=kb.live_revision).order_by("name").first()
    if backend is None:
        return 0
    address = urlsplit(backend.base_url)
    policy = kb.live_revision.gateway_policy if kb.live_revision else None
    # After every change the demo recorded (the rollouts a few steps before may be under
    # five seconds old on a fast machine): the calls fall where kb-assistant's live
    # revision already served, as the chain says.
    newest = Event.objects.order_by("-sequence").values_list("created_at", flat=True).first()
    started = timezone.now() - dt.timedelta(seconds=5)
    if newest is not None and newest >= started:
        started = newest + dt.timedelta(milliseconds=1)

    base = SpanFacts(
        trace_id=DEMO_TRACE,
        span_id="",
        parent_span_id="",
        name=f"chat {backend.model_name}",
        started_at=started,
        duration_ms=2400.0,
        operation="chat",
        request_model=backend.model_name,
        response_model=backend.model_name,
        server_address=address.hostname or "",
        server_port=address.port,
        input_tokens=1800,
        output_tokens=240,
        finish_reasons=["stop"],
        ttft_ms=610.0,
        service_slug="kb-assistant",
        tenant="support",
        task_type="chat",
        gateway_policy_version=policy.label if policy else "",
    )

    def call(n: int, **facts: Any) -> SpanFacts:
        return dataclasses.replace(
            base,
            span_id=f"{0xB7AD6B7169203331 + n:016x}",
            started_at=started + dt.timedelta(seconds=n),
            duration_ms=2400.0 + 900 * n,
            ttft_ms=610.0 + 400 * n,
            **facts,
        )

    calls = [
        call(0),
        call(1, retry_count=1, degradation="shorter-context", finish_reasons=["length"]),
        call(
            2,
            name="chat sql-coder",
            request_model="sql-coder",
            response_model="sql-coder",
            server_address="sql-gpu7.internal",
            server_port=8000,
            service_slug="dataagent-sql",
            task_type="sql",
            gateway_policy_version="",
        ),
    ]
    return record_spans(Extracted(spans=calls)).stored
