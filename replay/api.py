"""Replay over REST: backends, sample sets, runs and probes, under /api/replay/.

Anyone signed in reads everything (auditors included), as in `ledger.api.registry`. Writes
call the `replay.services` verbs with the caller as actor; the domain validates,
decides who may, writes and appends the Event. This module checks the same rule
first (403 before a payload is even validated) and translates the domain's
refusals into HTTP through `lib.api.DomainVerbMixin`.
"""

from __future__ import annotations

from django.db.models import Count, Prefetch
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    extend_schema,
    extend_schema_view,
)
from rest_framework import exceptions, mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.parsers import BaseParser, JSONParser
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request
from rest_framework.response import Response

from lib.api import DomainVerbMixin
from replay import permissions, services
from replay.filters import BackendFilter, ProbeFilter, RunFilter, SampleSetFilter
from replay.models import Backend, Result, Run, SampleSet
from replay.serializers import (
    BackendDetailSerializer,
    BackendSerializer,
    BackendUpdateSerializer,
    ProbeSerializer,
    RunDetailSerializer,
    RunSerializer,
    RunStartSerializer,
    SampleSetDetailSerializer,
    SampleSetImportSerializer,
    SampleSetSerializer,
)

NDJSON = "application/x-ndjson"


class NDJSONParser(BaseParser):
    """A JSONL body handed over as text: the domain parses it line by line."""

    media_type = NDJSON

    def parse(self, stream, media_type=None, parser_context=None) -> str:
        try:
            return stream.read().decode("utf-8-sig")
        except UnicodeDecodeError as error:
            raise exceptions.ParseError(f"The body is not UTF-8 text: {error}") from None


# ---------------------------------------------------------------- permissions


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


class SampleSetWritePermission(BasePermission):
    message = "Only model owners and platform SREs can import sample sets."

    def has_permission(self, request: Request, view) -> bool:
        if not request.user or not request.user.is_authenticated:
            return False
        return request.method in SAFE_METHODS or permissions.can_manage_sample_sets(request.user)


class RunStartPermission(BasePermission):
    """Starting a run: the caller must be able to manage some backend; the verb checks which."""

    message = "Only model owners of the backend's service team and platform SREs can start runs."

    def has_permission(self, request: Request, view) -> bool:
        if not request.user or not request.user.is_authenticated:
            return False
        return request.method in SAFE_METHODS or permissions.can_register_backends(request.user)


# ---------------------------------------------------------------- backends


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


# ---------------------------------------------------------------- sample sets

SAMPLE_SET_REF = OpenApiParameter(
    "ref",
    str,
    OpenApiParameter.PATH,
    description="name@version, or name alone for its latest version, e.g. kb-smoke@3.",
)


@extend_schema_view(
    list=extend_schema(summary="Sample sets, every version, with their sample counts"),
    retrieve=extend_schema(
        summary="One sample set version, with its samples", parameters=[SAMPLE_SET_REF]
    ),
)
class SampleSetViewSet(DomainVerbMixin, viewsets.ReadOnlyModelViewSet):
    """Versioned sample sets, addressed as name@version (or name for the latest)."""

    permission_classes = [SampleSetWritePermission]
    filterset_class = SampleSetFilter
    lookup_field = "ref"
    lookup_value_regex = r"[-a-zA-Z0-9_]+(@[0-9]+)?"

    def get_queryset(self):
        queryset = (
            SampleSet.objects.select_related("created_by")
            .annotate(sample_count=Count("samples"))
            .order_by("name", "-version")
        )
        if self.action == "retrieve":
            queryset = queryset.prefetch_related("samples")
        return queryset

    def get_serializer_class(self):
        if self.action == "retrieve":
            return SampleSetDetailSerializer
        if self.action == "import_jsonl":
            return SampleSetImportSerializer
        return SampleSetSerializer

    def get_object(self) -> SampleSet:
        name, _, version = self.kwargs["ref"].partition("@")
        queryset = self.get_queryset().filter(name=name)
        sample_set = (
            queryset.filter(version=int(version)).first()
            if version
            else queryset.order_by("-version").first()
        )
        if sample_set is None:
            raise exceptions.NotFound(f"No sample set {self.kwargs['ref']}.")
        return sample_set

    @extend_schema(
        summary="The version as JSON Lines, one sample a line",
        parameters=[SAMPLE_SET_REF],
        responses={(200, NDJSON): OpenApiTypes.STR},
    )
    @action(detail=True, methods=["get"], filterset_class=None, pagination_class=None)
    def export(self, request: Request, ref: str | None = None) -> HttpResponse:
        sample_set = self.get_object()
        response = HttpResponse(
            services.export_sample_set(sample_set), content_type=f"{NDJSON}; charset=utf-8"
        )
        response["Content-Disposition"] = (
            f'attachment; filename="{sample_set.name}@{sample_set.version}.jsonl"'
        )
        return response

    @extend_schema(
        summary="Import a set from JSON Lines: a new version if anything changed",
        description=(
            "Send JSON `{name, description, jsonl}`, or the JSONL itself as "
            f"`{NDJSON}` with `?name=` (and optional `&description=`). Every line is "
            "validated first; problems come back on `jsonl` as `line N: field: message` and "
            "nothing is written. 201 with the new version, or 200 with the latest version "
            "when the lines are the same."
        ),
        parameters=[
            OpenApiParameter("name", str, description=f"The set's name (with an {NDJSON} body)."),
            OpenApiParameter("description", str, description=f"With an {NDJSON} body."),
        ],
        request={
            "application/json": SampleSetImportSerializer,
            NDJSON: OpenApiTypes.STR,
        },
        responses={201: SampleSetSerializer, 200: SampleSetSerializer},
        examples=[
            OpenApiExample(
                "JSON body",
                request_only=True,
                media_type="application/json",
                value={
                    "name": "kb-smoke",
                    "description": "Smoke test of the knowledge-base assistant",
                    "jsonl": '{"key": "capital-fr", "category": "short_qa", "messages": '
                    '[{"role": "user", "content": "Capital of France?"}], "checks": '
                    '[{"type": "contains", "value": "Paris"}]}\n',
                },
            )
        ],
    )
    @action(
        detail=False,
        methods=["post"],
        url_path="import",
        parser_classes=[JSONParser, NDJSONParser],
        filterset_class=None,
        pagination_class=None,
    )
    def import_jsonl(self, request: Request) -> Response:
        if isinstance(request.data, str):
            data = {
                "name": request.query_params.get("name", ""),
                "description": request.query_params.get("description", ""),
                "jsonl": request.data,
            }
        else:
            data = request.data
        payload = SampleSetImportSerializer(data=data)
        payload.is_valid(raise_exception=True)
        sample_set, created = self.call_verb(services.import_sample_set, **payload.validated_data)
        sample_set = self.get_queryset().get(pk=sample_set.pk)
        return Response(
            SampleSetSerializer(sample_set, context=self.get_serializer_context()).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )


# ---------------------------------------------------------------- runs


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
