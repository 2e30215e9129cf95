"""POST /api/otlp/v1/traces as OTLP/HTTP defines it: JSON and protobuf, gzip or not,
only model calls kept and only their structured facts, content dropped and counted,
partial success naming each span rejected, and every refusal a google.rpc.Status."""

from __future__ import annotations

import datetime as dt
import gzip

import orjson
import pytest
from django.utils import timezone
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from rest_framework.authtoken.models import Token

from ledger.models import ModelCallSpan
from ledger.traces.otlp import decode
from lib import metrics
from tests.factories import UserFactory
from tests.ledger.traces.helpers import SPAN, TRACE, attribute, export, model_call

pytestmark = pytest.mark.django_db
URL = "/api/otlp/v1/traces"


@pytest.fixture
def collector():
    return UserFactory(username="otel-collector", roles=["trace_ingest"])


@pytest.fixture
def token(collector):
    return Token.objects.create(user=collector).key


def post(client, body, *, token, content_type="application/json", **headers):
    data = orjson.dumps(body) if isinstance(body, dict) else body
    return client.post(
        URL, data, content_type=content_type, HTTP_AUTHORIZATION=f"Token {token}", **headers
    )


def counted(metric, **labels):
    return metric.labels(**labels)._value.get() if labels else metric._value.get()


def test_a_collectors_json_batch_keeps_the_model_calls_facts_and_nothing_of_their_content(
    client, token
):
    call = model_call(
        ledger__service="kb-assistant",
        ledger__tenant="support",
        ledger__task_type="chat",
        ledger__gateway_policy_version="v3",
        ledger__degradation="shorter-context",
        ledger__retry_count=1,
        gen_ai__response__time_to_first_chunk=0.182,
        gen_ai__latency__queue=0.031,
        error__type="",
    )
    call["attributes"] += [
        attribute("gen_ai.input.messages", '[{"role":"user","content":"my salary is"}]'),
        attribute("gen_ai.output.messages", '[{"role":"assistant","content":"secret"}]'),
        attribute("gen_ai.system_instructions", "be terse"),
    ]
    call["events"] = [
        {"name": "gen_ai.user.message", "attributes": [attribute("content", "hello")]},
        {"name": "gen_ai.choice", "attributes": [attribute("message", "answer")]},
    ]
    retrieval = model_call(span_id="00f067aa0ba902b7", operation="retrieval")
    dropped_before = counted(metrics.OTLP_CONTENT_DROPPED)

    response = post(client, export(call, retrieval), token=token)

    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/json"
    assert response.json() == {}
    span = ModelCallSpan.objects.get()
    assert (span.trace_id, span.span_id) == (TRACE, SPAN)
    assert span.operation == "chat" and span.request_model == "Model-2-7B-Instruct"
    assert (span.server_address, span.server_port) == ("kb-vllm.internal", 8000)
    assert (span.input_tokens, span.output_tokens) == (812, 164)
    assert span.finish_reasons == ["stop"] and span.duration_ms == pytest.approx(1250, abs=0.01)
    assert span.ttft_ms == pytest.approx(182) and span.latency_ms == {"queue": pytest.approx(31)}
    assert (span.service_slug, span.tenant, span.task_type) == ("kb-assistant", "support", "chat")
    assert (span.gateway_policy_version, span.degradation, span.retry_count) == (
        "v3",
        "shorter-context",
        1,
    )
    assert span.resource_service == "gateway"
    stored = orjson.dumps(list(ModelCallSpan.objects.values())).decode()
    for content in ("salary", "secret", "terse", "hello", "answer"):
        assert content not in stored
    # Three content attributes and two content events, counted.
    assert counted(metrics.OTLP_CONTENT_DROPPED) - dropped_before == 5


def test_gzip_protobuf_as_the_sdk_sends_it_answers_in_protobuf(client, token):
    request = decode(orjson.dumps(export(model_call())), "application/json")
    body = gzip.compress(request.SerializeToString())

    response = post(
        client,
        body,
        token=token,
        content_type="application/x-protobuf",
        HTTP_CONTENT_ENCODING="gzip",
    )

    assert response.status_code == 200
    assert response["Content-Type"] == "application/x-protobuf"
    answer = ExportTraceServiceResponse.FromString(response.content)
    assert not answer.HasField("partial_success")
    assert ModelCallSpan.objects.get().trace_id == TRACE


def test_a_span_sent_twice_is_stored_once(client, token):
    batch = export(model_call())  # an exporter's retry sends the same bytes again
    for _ in range(2):
        assert post(client, batch, token=token).status_code == 200
    assert ModelCallSpan.objects.count() == 1


def test_spans_whose_facts_do_not_hold_are_rejected_as_a_partial_success(client, token):
    good = model_call()
    negative = model_call(span_id="1111111111111111", gen_ai__usage__output_tokens=-3)
    ancient = model_call(
        span_id="2222222222222222", started=timezone.now() - dt.timedelta(days=500)
    )

    response = post(client, export(good, negative, ancient), token=token)

    assert response.status_code == 200
    partial = response.json()["partialSuccess"]
    assert partial["rejectedSpans"] == "2"
    message = partial["errorMessage"]
    assert "spans[1]: gen_ai.usage.output_tokens: expected a whole number" in message
    assert "before the retention of 400 days (RETENTION_TRACES_DAYS)" in message
    assert ModelCallSpan.objects.count() == 1


@pytest.mark.parametrize(
    ("body", "where"),
    [
        (b"{not json", "not JSON"),
        (b"[]", "$: expected an object"),
        (orjson.dumps({"resourceSpans": {}}), "$.resourceSpans: expected a list"),
        (
            orjson.dumps(export({**model_call(), "traceId": "xyz"})),
            "$.resourceSpans[0].scopeSpans[0].spans[0].traceId: expected 32 hex digits",
        ),
        (
            orjson.dumps(export({**model_call(), "startTimeUnixNano": {"a": 1}})),
            "not an OTLP JSON export",
        ),
    ],
)
def test_a_malformed_json_export_is_a_400_naming_where(client, token, body, where):
    response = post(client, body, token=token)
    assert response.status_code == 400
    assert where in response.json()["message"]
    assert not ModelCallSpan.objects.exists()


def test_malformed_protobuf_and_gzip_are_400s_in_protobuf(client, token):
    response = post(client, b"\xff\xff\xff", token=token, content_type="application/x-protobuf")
    assert response.status_code == 400
    status = status_pb2.Status.FromString(response.content)
    assert "not an ExportTraceServiceRequest" in status.message

    response = post(
        client, b"plain", token=token, content_type="application/json", HTTP_CONTENT_ENCODING="gzip"
    )
    assert response.status_code == 400
    assert "not gzip data" in response.json()["message"]


def test_other_encodings_are_415s(client, token):
    assert post(client, b"x", token=token, content_type="text/plain").status_code == 415
    response = post(client, b"x", token=token, HTTP_CONTENT_ENCODING="br")
    assert response.status_code == 415
    assert "expected gzip, deflate or none" in response.json()["message"]


def test_an_export_that_inflates_past_the_limit_is_a_413(client, token, settings):
    settings.OTLP_MAX_BODY_BYTES = 10_000
    bomb = gzip.compress(b" " * 200_000)  # a few hundred bytes on the wire
    response = post(client, bomb, token=token, HTTP_CONTENT_ENCODING="gzip")
    assert response.status_code == 413
    assert "over 10,000 bytes once inflated" in response.json()["message"]
    response = post(client, b" " * 20_000, token=token)
    assert response.status_code == 413


def test_only_the_ingest_role_or_an_administrator_may_send(client, token, owner, admin_user):
    body = export(model_call())
    anonymous = client.post(URL, orjson.dumps(body), content_type="application/json")
    assert anonymous.status_code == 401 and anonymous["WWW-Authenticate"] == "Token"
    assert post(client, body, token="0" * 40).status_code == 401
    owner_token = Token.objects.create(user=owner).key
    refused = post(client, body, token=owner_token)
    assert refused.status_code == 403 and "trace ingest role" in refused.json()["message"]
    assert not ModelCallSpan.objects.exists()
    admin_token = Token.objects.create(user=admin_user).key
    assert post(client, body, token=admin_token).status_code == 200
    assert client.get(URL, HTTP_AUTHORIZATION=f"Token {token}").status_code == 405


def test_odd_text_is_stored_clean_or_refused_never_a_500(client, token):
    nul = orjson.dumps(export(model_call())).replace(
        b'"Model-2-7B-Instruct"', b'"Model\\u0000-2"', 1
    )
    assert post(client, nul, token=token).status_code == 200
    assert ModelCallSpan.objects.get().request_model == "Model-2"
    lone = nul.replace(b"\\u0000", b"\\ud800")
    response = post(client, lone, token=token)
    assert response.status_code == 400 and "not JSON" in response.json()["message"]
    deep = b'{"resourceSpans": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    assert post(client, deep, token=token).status_code == 400


def test_an_export_without_spans_is_a_success(client, token):
    from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans

    assert post(client, {}, token=token).json() == {}
    empty = ExportTraceServiceRequest(resource_spans=[ResourceSpans()]).SerializeToString()
    response = post(client, empty, token=token, content_type="application/x-protobuf")
    assert response.status_code == 200 and response.content == b""
