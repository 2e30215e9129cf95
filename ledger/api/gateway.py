"""A service's gateway policy over the API.

    services/<slug>/gateway-policies/            GET the versions, POST a new one
    services/<slug>/gateway-policies/<version>/  GET one version (by its number)
    services/<slug>/gateway-policy/              GET the version in force

Recording a version calls `services.create_gateway_policy` as the requester; who may
is `permissions.ensure_can_edit` (model owners of the service's team).
"""

from __future__ import annotations

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.generics import GenericAPIView
from rest_framework.request import Request
from rest_framework.response import Response

from ledger import services
from ledger.models import GatewayPolicy, Service
from ledger.serializers.gateway import (
    GatewayPolicyCreateSerializer,
    GatewayPolicyInForceSerializer,
    GatewayPolicySerializer,
)
from lib.api import DomainVerbMixin


class GatewayPoliciesView(DomainVerbMixin, GenericAPIView):
    serializer_class = GatewayPolicySerializer

    def get_queryset(self) -> QuerySet[GatewayPolicy]:
        if getattr(self, "swagger_fake_view", False):  # the schema generator has no slug
            return GatewayPolicy.objects.none()
        return GatewayPolicy.objects.select_related("service", "created_by").filter(
            service__slug=self.kwargs["slug"]
        )

    def get_serializer_class(self):
        if self.request.method == "POST":
            return GatewayPolicyCreateSerializer
        return GatewayPolicySerializer

    @extend_schema(
        summary="A service's gateway policy versions, newest first",
        responses={200: GatewayPolicySerializer(many=True)},
    )
    def get(self, request: Request, slug: str) -> Response:
        get_object_or_404(Service, slug=slug)
        policies = self.get_queryset().order_by("-version")
        page = self.paginate_queryset(policies)
        data = GatewayPolicySerializer(page if page is not None else policies, many=True).data
        return self.get_paginated_response(data) if page is not None else Response(data)

    @extend_schema(
        summary="Record a new version of a service's gateway policy",
        request=GatewayPolicyCreateSerializer,
        responses={
            201: OpenApiResponse(GatewayPolicySerializer, description="Recorded as v<n>."),
            400: OpenApiResponse(
                description="The document is refused: each problem is named by its JSON path "
                "(tenants[1].rpm, degradation.sql, fallbacks[0].to_service)."
            ),
            403: OpenApiResponse(description="Only model owners of the service's team may."),
        },
    )
    def post(self, request: Request, slug: str) -> Response:
        service = get_object_or_404(Service.objects.select_related("team"), slug=slug)
        body = GatewayPolicyCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        policy = self.call_verb(
            services.create_gateway_policy,
            service,
            document=body.validated_data["document"],
            note=body.validated_data.get("note", ""),
        )
        return Response(GatewayPolicySerializer(policy).data, status=status.HTTP_201_CREATED)


class GatewayPolicyView(GenericAPIView):
    serializer_class = GatewayPolicySerializer
    queryset = GatewayPolicy.objects.select_related("service", "created_by")

    @extend_schema(summary="One version of a service's gateway policy")
    def get(self, request: Request, slug: str, version: int) -> Response:
        policy = get_object_or_404(self.get_queryset(), service__slug=slug, version=version)
        return Response(GatewayPolicySerializer(policy).data)


class GatewayPolicyInForceView(GenericAPIView):
    serializer_class = GatewayPolicyInForceSerializer
    queryset = Service.objects.select_related("live_revision__gateway_policy")

    @extend_schema(
        summary="The gateway policy in force: the live revision's version",
        responses={
            200: GatewayPolicyInForceSerializer,
            404: OpenApiResponse(description="No such service, or nothing of it is live."),
        },
    )
    def get(self, request: Request, slug: str) -> Response:
        service = get_object_or_404(self.get_queryset(), slug=slug)
        live = service.live_revision
        if live is None:
            return Response(
                {"detail": f"Nothing of {service.slug} is live, so no gateway policy is in force."},
                status=status.HTTP_404_NOT_FOUND,
            )
        policy = live.gateway_policy
        data = {
            "version": policy.label,
            "revision": live.label,
            "known": policy.known,
            "sha256": policy.sha256,
            "document": policy.document,
        }
        return Response(GatewayPolicyInForceSerializer(data).data)
