"""The OpenTelemetry SDK's own OTLP/HTTP exporter (protobuf, gzip), configured only
through the environment as the docs say, delivers model-call spans to a live server."""

from __future__ import annotations

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.trace import SpanKind
from rest_framework.authtoken.models import Token

from ledger.models import ModelCallSpan
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_sdk_exporter_configured_by_environment_delivers_spans(live_server, monkeypatch):
    collector = UserFactory(username="otel-collector", roles=["trace_ingest"])
    key = Token.objects.create(user=collector).key
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"{live_server.url}/api/otlp")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"authorization=Token%20{key}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
    exporter = OTLPSpanExporter()
    results: list[SpanExportResult] = []
    export = exporter.export
    exporter.export = lambda spans: results.append(export(spans)) or results[-1]  # type: ignore[method-assign]
    provider = TracerProvider(resource=Resource.create({"service.name": "kb-gateway"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("tests")

    with tracer.start_as_current_span("chat Model-2-7B-Instruct", kind=SpanKind.CLIENT) as span:
        span.set_attributes(
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "Model-2-7B-Instruct",
                "gen_ai.usage.input_tokens": 40,
                "gen_ai.usage.output_tokens": 12,
                "gen_ai.response.finish_reasons": ["length"],
                "gen_ai.input.messages": '[{"role": "user", "content": "private words"}]',
                "ledger.tenant": "support",
            }
        )
        trace_id = format(span.get_span_context().trace_id, "032x")
    with tracer.start_as_current_span("lookup"):
        pass  # not a model call: sent, not kept
    provider.shutdown()

    assert results == [SpanExportResult.SUCCESS, SpanExportResult.SUCCESS]
    stored = ModelCallSpan.objects.get()
    assert stored.trace_id == trace_id
    assert (stored.input_tokens, stored.output_tokens, stored.tenant) == (40, 12, "support")
    assert stored.finish_reasons == ["length"] and stored.resource_service == "kb-gateway"
    assert "private words" not in str(ModelCallSpan.objects.values().get())
