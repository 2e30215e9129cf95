"""Replay backends and their probes over REST."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import (
    OpenApiParameter,
    extend_schema,
    extend_schema_view,
)
from rest_framework import exceptions, mixins, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request
from rest_framework.response import Response

from lib.api import DomainVerbMixin
from replay import permissions, services
from replay.filters import BackendFilter, ProbeFilter
from replay.models import Backend
from replay.serializers import (
    BackendDetailSerializer,
    BackendSerializer,
    BackendUpdateSerializer,
    ProbeSerializer,
)


class BackendWritePermission(BasePermission):
    """Everyone signed in reads; the service team's model owners and platform SREs write."""

    message = "Only model owners of the backend's service team and platform SREs can do this."

    def has_permission(self, request: Request, view) -> bool:
        if not request.user or not request.user.is_authenticated:
            return False
        return request.method in SAFE_METHODS or permissions.can_register_backends(request.user)

    def has_object_permission(self, request: Request, view, obj: Backend) -> bool:
        return request.method in SAFE_METHODS or permissions.can_manage_backend(
            request.user, obj.revision
        )


@extend_schema_view(
    list=extend_schema(summary="Replay backends: OpenAI-compatible endpoints and their revision"),
    retrieve=extend_schema(summary="One backend, by name, with its latest probe"),
    create=extend_schema(
        summary="Register a backend (the credential is the NAME of an environment variable)"
    ),
    partial_update=extend_schema(summary="Change a backend"),
)
class BackendViewSet(
    DomainVerbMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    viewsets.GenericViewSet,
):
    """Backends by name. Nothing is deleted over the API: a backend keeps its runs."""

    http_method_names = ["get", "post", "patch", "head", "options"]
    permission_classes = [BackendWritePermission]
    filterset_class = BackendFilter
    lookup_field = "name"
    queryset = Backend.objects.select_related("revision__service__team")

    def get_serializer_class(self):
        if self.action == "retrieve":
            return BackendDetailSerializer
        if self.action in ("update", "partial_update"):
            return BackendUpdateSerializer
        if self.action == "probes":
            return ProbeSerializer
        return BackendSerializer

    def get_queryset(self):
        return Backend.objects.select_related("revision__service__team").order_by("name")

    def perform_create(self, serializer):
        serializer.instance = self.call_verb(services.create_backend, **serializer.validated_data)

    def perform_update(self, serializer):
        self.call_verb(services.update_backend, serializer.instance, **serializer.validated_data)
        serializer.instance.refresh_from_db()

    @extend_schema(
        summary="Probes of a backend, newest first",
        filters=False,
        parameters=[
            OpenApiParameter(
                "reachable", bool, description="Only probes that reached it (or not)."
            ),
            OpenApiParameter(
                "drifted", bool, description="Only probes that found drift (or none)."
            ),
        ],
        responses=ProbeSerializer(many=True),
    )
    @action(detail=True, methods=["get"], filterset_class=None)
    def probes(self, request: Request, name: str | None = None) -> Response:
        backend = get_object_or_404(self.get_queryset(), name=name)
        probes = ProbeFilter(
            request.query_params,
            queryset=backend.probes.select_related("backend").order_by("-started_at"),
            request=request,
        )
        if not probes.is_valid():
            raise exceptions.ValidationError(probes.errors)
        page = self.paginate_queryset(probes.qs)
        return self.get_paginated_response(ProbeSerializer(page, many=True).data)
