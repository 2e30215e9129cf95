"""Sample sets over REST: import as JSON Lines, read, export."""

from __future__ import annotations

from django.db.models import Count
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    extend_schema,
    extend_schema_view,
)
from rest_framework import exceptions, status, viewsets
from rest_framework.decorators import action
from rest_framework.parsers import BaseParser
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request
from rest_framework.response import Response

from lib.api import DomainVerbMixin, JSONParser
from replay import permissions, services
from replay.filters import SampleSetFilter
from replay.models import SampleSet
from replay.serializers import (
    SampleSetDetailSerializer,
    SampleSetImportSerializer,
    SampleSetSerializer,
)

NDJSON = "application/x-ndjson"


class NDJSONParser(BaseParser):
    """A JSONL body handed over as text: the domain parses it line by line."""

    media_type = NDJSON

    # DRF makes whatever a parser returns `request.data`; the stubs expect a mapping.
    def parse(self, stream, media_type=None, parser_context=None) -> str:  # type: ignore[override]
        try:
            return stream.read().decode("utf-8-sig")
        except UnicodeDecodeError as error:
            raise exceptions.ParseError(f"The body is not UTF-8 text: {error}") from None


class SampleSetWritePermission(BasePermission):
    message = "Only model owners and platform SREs can import sample sets."

    def has_permission(self, request: Request, view) -> bool:
        if not request.user or not request.user.is_authenticated:
            return False
        return request.method in SAFE_METHODS or permissions.can_manage_sample_sets(request.user)


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
