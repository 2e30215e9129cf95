"""GET /api/services/{slug}/incident/: the incident screen in one call, what the gateway
should be doing included (it reads the gateway room, hence this room)."""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from ledger.models import Service
from lib.aggregates import split
from releases.gateway.queries import service_gateway
from releases.gateway.serializers import ServiceGatewaySerializer
from releases.governance.queries.incident import incident, incident_service
from releases.governance.serializers.incident import IncidentSerializer


class IncidentWithGatewaySerializer(IncidentSerializer):
    gateway = ServiceGatewaySerializer(help_text=_("What the gateway should be doing, and is it."))


class IncidentView(APIView):
    @extend_schema(
        summary="Everything on the incident screen: live, rollout, rollback with readiness, "
        "what the gateway should be doing, playbooks, changes of the last 72 hours and owners",
        responses={
            200: IncidentWithGatewaySerializer,
            404: OpenApiResponse(description="There is no such service; the detail names it."),
        },
    )
    def get(self, request: Request, slug: str) -> Response:
        try:
            service = incident_service(slug)
        except Service.DoesNotExist:
            raise exceptions.NotFound(f"There is no service {slug!r}.") from None
        screen = incident(service)
        shaped = IncidentSerializer.shape(screen)
        found = service_gateway(service, split(getattr(service, "task_type_list", "")))
        shaped["gateway"] = ServiceGatewaySerializer.shape(found, service, screen.now)
        return Response(IncidentWithGatewaySerializer(shaped).data)
