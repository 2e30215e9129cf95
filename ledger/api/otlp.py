"""`POST /api/otlp/v1/traces`: OTLP/HTTP trace exports, as the OpenTelemetry SDK
exporters and collectors send them (`OTEL_EXPORTER_OTLP_ENDPOINT=https://<ledger>/api/otlp`,
`OTEL_EXPORTER_OTLP_HEADERS=authorization=Token%20<key>`).

Answers as OTLP/HTTP specifies: 200 with an `ExportTraceServiceResponse` in the
request's encoding (its `partialSuccess` naming the spans rejected and why), or a
`google.rpc.Status` with 400 (a malformed export, its path named), 401/403 (no or the
wrong token), 413 (too large, before or after inflating) or 415 (another encoding).
A plain Django view: OTLP's bodies and answers are not DRF's JSON.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from rest_framework import exceptions

from ledger import permissions
from ledger.traces import otlp
from ledger.traces.services import record_spans
from lib.throttling import TokenAuthentication

# google.rpc.Code values the Status body carries.
_CODES = {400: 3, 401: 16, 403: 7, 413: 8, 415: 3, 429: 8}
_MAX_MESSAGE = 2_000


def _refusal(request: HttpRequest, status: int, message: str) -> HttpResponse:
    body, content_type = otlp.status_body(
        request.content_type or "", message[:_MAX_MESSAGE], _CODES.get(status, 2)
    )
    response = HttpResponse(body, status=status, content_type=content_type)
    if status == 401:
        response["WWW-Authenticate"] = "Token"
    return response


def _read(request: HttpRequest, limit: int) -> bytes:
    declared = request.META.get("CONTENT_LENGTH") or "0"
    if declared.isdigit() and int(declared) > limit:
        raise otlp.OtlpRefused(413, f"the export is over {limit:,} bytes")
    body = request.read(limit + 1)
    if len(body) > limit:
        raise otlp.OtlpRefused(413, f"the export is over {limit:,} bytes")
    return body


@csrf_exempt  # a token, never a session cookie: nothing a browser could be tricked into
@require_POST
def traces(request: HttpRequest) -> HttpResponse:
    try:
        found = TokenAuthentication().authenticate(request)
    except exceptions.Throttled as error:
        return _refusal(request, 429, str(error.detail))
    except exceptions.AuthenticationFailed as error:
        return _refusal(request, 401, str(error.detail))
    if found is None:
        return _refusal(request, 401, "send the API token: Authorization: Token <key>")
    user = found[0]
    if not permissions.can_ingest_traces(user):
        return _refusal(
            request, 403, "this token's account may not send traces (trace ingest role)"
        )
    limit = settings.OTLP_MAX_BODY_BYTES
    try:
        body = otlp.inflate(
            _read(request, limit), request.headers.get("Content-Encoding", ""), limit
        )
        export = otlp.decode(body, request.content_type or "")
    except otlp.OtlpRefused as refused:
        return _refusal(request, refused.status, refused.message)
    recorded = record_spans(otlp.extract(export))
    rejected = len(recorded.rejected)
    message = "; ".join(f"{where}: {why}" for where, why in recorded.rejected[:20])[:_MAX_MESSAGE]
    if (request.content_type or "").lower() == otlp.JSON:
        return HttpResponse(otlp.json_response(rejected, message), content_type=otlp.JSON)
    return HttpResponse(otlp.protobuf_response(rejected, message), content_type=otlp.PROTOBUF)
