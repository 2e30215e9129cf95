"""Replay runs over REST: start one, read it and its results."""

from __future__ import annotations

from django.db.models import Prefetch
from drf_spectacular.utils import (
    OpenApiExample,
    extend_schema,
    extend_schema_view,
)
from rest_framework import exceptions, mixins, status, viewsets
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request
from rest_framework.response import Response

from lib.api import DomainVerbMixin
from replay import permissions, services
from replay.filters import RunFilter
from replay.models import Result, Run
from replay.serializers import (
    RunDetailSerializer,
    RunSerializer,
    RunStartSerializer,
)


class RunStartPermission(BasePermission):
    """Starting a run: the caller must be able to manage some backend; the verb checks which."""

    message = "Only model owners of the backend's service team and platform SREs can start runs."

    def has_permission(self, request: Request, view) -> bool:
        if not request.user or not request.user.is_authenticated:
            return False
        return request.method in SAFE_METHODS or permissions.can_register_backends(request.user)


@extend_schema_view(
    list=extend_schema(summary="Replay runs, newest first, with their summary and verdict"),
    retrieve=extend_schema(summary="One run, with every result"),
)
class RunViewSet(
    DomainVerbMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    """Runs are started here (POST) and written by the workers; never edited over the API."""

    permission_classes = [RunStartPermission]
    filterset_class = RunFilter

    def get_queryset(self):
        queryset = Run.objects.select_related(
            "sample_set", "backend", "revision__service", "requested_by"
        ).order_by("-created_at")
        if self.action == "retrieve":
            queryset = queryset.prefetch_related(
                Prefetch(
                    "results",
                    queryset=Result.objects.select_related("sample").order_by(
                        "sample__key", "attempt"
                    ),
                )
            )
        return queryset

    def get_serializer_class(self):
        if self.action == "retrieve":
            return RunDetailSerializer
        if self.action == "create":
            return RunStartSerializer
        return RunSerializer

    @extend_schema(
        summary="Start a run: replay a sample set against a backend (queued for a worker)",
        request=RunStartSerializer,
        responses={201: RunSerializer},
        examples=[
            OpenApiExample(
                "Replay a set's version",
                value={"backend": "kb-backend", "sample_set": "kb-smoke@1", "concurrency": 2},
                request_only=True,
            )
        ],
    )
    def create(self, request: Request) -> Response:
        payload = RunStartSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        backend = payload.validated_data["backend"]
        if not permissions.can_manage_backend(request.user, backend.revision):
            raise exceptions.PermissionDenied(RunStartPermission.message)
        name, _, version = payload.validated_data["sample_set"].partition("@")
        if version and not version.isdigit():
            raise exceptions.ValidationError({"sample_set": ["Give name or name@version."]})
        sample_set = services.get_sample_set(name, int(version) if version else None)
        if sample_set is None:
            raise exceptions.ValidationError(
                {"sample_set": [f"No sample set {payload.validated_data['sample_set']}."]}
            )
        run = self.call_verb(
            services.start_run,
            backend=backend,
            sample_set=sample_set,
            trigger=Run.Trigger.MANUAL,
            concurrency=payload.validated_data.get("concurrency"),
        )
        run = self.get_queryset().get(pk=run.pk)
        data = RunSerializer(run, context=self.get_serializer_context()).data
        return Response(data, status=status.HTTP_201_CREATED)
