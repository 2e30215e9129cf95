"""GET /api/services/{slug}/incident/: the incident screen in one call."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from ledger.models import Service
from releases.governance.queries.incident import incident, incident_service
from releases.governance.serializers.incident import IncidentSerializer


class IncidentView(APIView):
    @extend_schema(
        summary="Everything on the incident screen: live, rollout, rollback with readiness, "
        "playbooks, changes of the last 72 hours and owners",
        responses={
            200: IncidentSerializer,
            404: OpenApiResponse(description="There is no such service; the detail names it."),
        },
    )
    def get(self, request: Request, slug: str) -> Response:
        try:
            service = incident_service(slug)
        except Service.DoesNotExist:
            raise exceptions.NotFound(f"There is no service {slug!r}.") from None
        return Response(IncidentSerializer(IncidentSerializer.shape(incident(service))).data)
