"""`GET /api/explain/{trace_id}/`: each model call of a trace and what the ledger had
approved to serve it (`releases.explain.queries`); anyone signed in, as the catalog."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy as _lazy
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from releases import permissions
from releases.explain.queries import CallExplained, TraceIdInvalid, clean_trace_id, explain_trace


class _LinkSerializer(serializers.Serializer):
    label = serializers.CharField()  # type: ignore[assignment]  # DRF Field has .label too
    url = serializers.CharField()


class _RevisionSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    label = serializers.CharField()  # type: ignore[assignment]  # DRF Field has .label too
    fingerprint = serializers.CharField()


class _CallSerializer(serializers.Serializer):
    span_id = serializers.CharField()
    started_at = serializers.DateTimeField()
    duration_ms = serializers.FloatField()
    operation = serializers.CharField()
    model = serializers.CharField()
    server = serializers.CharField()
    tenant = serializers.CharField()
    task_type = serializers.CharField()
    service = serializers.CharField(allow_null=True)
    backend = serializers.CharField(allow_null=True)
    revision = _RevisionSerializer(allow_null=True)
    approved_as = serializers.ChoiceField(choices=["live", "stage", "unapproved", "unknown"])
    live_revision = serializers.CharField(allow_null=True)
    stage = serializers.DictField(
        allow_null=True, help_text=_lazy("The stage in force: {release, stage, traffic_pct}.")
    )
    release = serializers.IntegerField(allow_null=True)
    gateway_policy_in_force = serializers.CharField()
    gateway_policy_said = serializers.CharField()
    happened = serializers.ListField(child=serializers.CharField())
    findings = serializers.ListField(child=serializers.CharField())
    rollbacks_open = serializers.ListField(child=serializers.IntegerField())
    unauthorized_changes_open = serializers.ListField(child=serializers.IntegerField())
    evidence = _LinkSerializer(many=True)


class ExplanationSerializer(serializers.Serializer):
    trace_id = serializers.CharField()
    calls = _CallSerializer(many=True)


def call_json(call: CallExplained) -> dict[str, Any]:
    span, revision = call.span, call.revision
    return {
        "span_id": span.span_id,
        "started_at": span.started_at,
        "duration_ms": span.duration_ms,
        "operation": span.operation,
        "model": span.response_model or span.request_model,
        "server": f"{span.server_address}:{span.server_port}"
        if span.server_port
        else span.server_address,
        "tenant": span.tenant,
        "task_type": span.task_type,
        "service": call.service.slug if call.service else None,
        "backend": call.backend.name if call.backend else None,
        "revision": {
            "id": revision.pk,
            "label": revision.label,
            "fingerprint": revision.fingerprint,
        }
        if revision
        else None,
        "approved_as": call.approved_as,
        "live_revision": call.live.revision.label if call.live and call.live.revision else None,
        "stage": {
            "release": call.share.cause.get("release"),
            "stage": call.share.cause.get("stage"),
            "traffic_pct": call.share.traffic_pct,
        }
        if call.share
        else None,
        "release": call.release.pk if call.release else None,
        "gateway_policy_in_force": call.policy_in_force,
        "gateway_policy_said": span.gateway_policy_version,
        "happened": call.happened,
        "findings": call.findings,
        "rollbacks_open": [rollback.pk for rollback in call.rollbacks],
        "unauthorized_changes_open": [change.pk for change in call.unauthorized],
        "evidence": [{"label": link.label, "url": link.url} for link in call.evidence],
    }


class ExplainView(APIView):
    @extend_schema(
        summary="Explain a trace: what served each model call, against what was approved",
        responses={
            200: ExplanationSerializer,
            400: OpenApiResponse(description="Not a trace id (32 hex digits)."),
            404: OpenApiResponse(description="No model call of this trace was received."),
        },
    )
    def get(self, request: Request, trace_id: str) -> Response:
        if not permissions.can_explain_traces(request.user):
            raise PermissionDenied()
        try:
            cleaned = clean_trace_id(trace_id)
        except TraceIdInvalid as error:
            raise ValidationError({"trace_id": [str(error)]}) from None
        calls = explain_trace(cleaned)
        if not calls:
            raise NotFound(_("No model call of trace %(trace)s was received.") % {"trace": cleaned})
        return Response({"trace_id": cleaned, "calls": [call_json(call) for call in calls]})
