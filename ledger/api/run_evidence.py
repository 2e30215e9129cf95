"""Daily run evidence over REST: the gateway pushes a service's day; anyone signed in reads.

Registered in config/api_router.py:

    router.register("run-summaries", ledger_run_evidence.RunSummaryViewSet, basename="run-summary")
    path("services/<slug:slug>/run-summaries/", ledger_run_evidence.ServiceRunSummariesView.as_view(),
         name="service_run_summaries")
    path("services/<slug:slug>/run-summaries/<str:date>/breakdown/",
         ledger_run_evidence.ServiceRunBreakdownView.as_view(), name="service_run_breakdown")

A push calls `services.record_run_summary` as the requester: who may is
`permissions.can_record_run_summary` (platform SREs — the gateway's account —
and model owners of the service's team); every field it refuses is named.
"""

from __future__ import annotations

import datetime as dt

import django_filters
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from rest_framework import status, viewsets
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.generics import GenericAPIView
from rest_framework.request import Request
from rest_framework.response import Response

from ledger import permissions, queries, services
from ledger.models import Revision, RunBreakdown, RunSummary, Service
from ledger.serializers import (
    RunBreakdownSerializer,
    RunSummaryOutcomeSerializer,
    RunSummaryPushSerializer,
    RunSummarySerializer,
)
from lib.api import ApiFilterSet, DomainVerbMixin


class ServiceRunSummaryFilter(ApiFilterSet):
    date_after = django_filters.DateFilter(
        field_name="date", lookup_expr="gte", help_text="Days on or after this one (YYYY-MM-DD)."
    )
    date_before = django_filters.DateFilter(
        field_name="date", lookup_expr="lte", help_text="Days on or before this one (YYYY-MM-DD)."
    )

    class Meta:
        model = RunSummary
        fields = ["source", "date_after", "date_before"]


class RunSummaryFilter(ServiceRunSummaryFilter):
    service = django_filters.CharFilter(field_name="service__slug", help_text="Service slug.")

    class Meta(ServiceRunSummaryFilter.Meta):
        fields = ["service", *ServiceRunSummaryFilter.Meta.fields]


@extend_schema_view(
    list=extend_schema(summary="Daily run summaries of every service, newest day first"),
    retrieve=extend_schema(summary="One service's day from one source"),
)
class RunSummaryViewSet(viewsets.ReadOnlyModelViewSet):
    """What each service did each day, as the gateway or the engine's metrics saw it."""

    serializer_class = RunSummarySerializer
    filterset_class = RunSummaryFilter

    def get_queryset(self) -> QuerySet[RunSummary]:
        return queries.run_summaries()


class ServiceRunSummariesView(DomainVerbMixin, GenericAPIView):
    """One service's days (GET), and the gateway's push of a day (POST)."""

    serializer_class = RunSummarySerializer
    filterset_class = ServiceRunSummaryFilter

    def get_queryset(self) -> QuerySet[RunSummary]:
        if getattr(self, "swagger_fake_view", False):  # the schema generator has no slug
            return RunSummary.objects.none()
        return queries.run_summaries().filter(service__slug=self.kwargs["slug"])

    def get_serializer_class(self):
        return RunSummaryPushSerializer if self.request.method == "POST" else RunSummarySerializer

    @extend_schema(
        summary="One service's daily run summaries, newest day first",
        responses={200: RunSummarySerializer(many=True)},
    )
    def get(self, request: Request, slug: str) -> Response:
        get_object_or_404(Service, slug=slug)
        summaries = self.filter_queryset(self.get_queryset())
        page = self.paginate_queryset(summaries)
        data = RunSummarySerializer(page if page is not None else summaries, many=True).data
        return self.get_paginated_response(data) if page is not None else Response(data)

    @extend_schema(
        summary="Record a service's day (the gateway's daily push); the same day again replaces it",
        request=RunSummaryPushSerializer,
        responses={
            201: OpenApiResponse(RunSummaryOutcomeSerializer, description="A new day, recorded."),
            200: OpenApiResponse(
                RunSummaryOutcomeSerializer,
                description="The day was there: replaced (the Event holds what it said), or "
                "unchanged when the numbers are the same.",
            ),
            400: OpenApiResponse(
                description="Bad input: each refused field is named, with what it accepts."
            ),
            403: OpenApiResponse(
                description="Only platform SREs (the gateway's account) and model owners of the "
                "service's team may push."
            ),
        },
    )
    def post(self, request: Request, slug: str) -> Response:
        service = get_object_or_404(Service.objects.select_related("team"), slug=slug)
        # Who may, before the body is read: a refused caller learns nothing of its faults.
        self.call_verb(permissions.ensure_can_record_run_summary, service)
        push = RunSummaryPushSerializer(data=request.data)
        push.is_valid(raise_exception=True)
        fields = dict(push.validated_data)
        date = fields.pop("date")
        number = fields.pop("revision", None)
        revision = None
        if number is not None:
            revision = Revision.objects.filter(service=service, number=number).first()
            if revision is None:
                return Response(
                    {"revision": [f"{service.slug} has no revision r{number}."]},
                    status=status.HTTP_400_BAD_REQUEST,
                )
        summary, outcome = self.call_verb(
            services.record_run_summary, service, date=date, revision=revision, **fields
        )
        summary = queries.run_summaries().get(pk=summary.pk)
        data = {**RunSummarySerializer(summary).data, "outcome": outcome}
        code = status.HTTP_201_CREATED if outcome == "recorded" else status.HTTP_200_OK
        return Response(data, status=code)


class RunBreakdownFilter(ApiFilterSet):
    class Meta:
        model = RunBreakdown
        fields = ["tenant", "task_type", "backend"]


class ServiceRunBreakdownView(GenericAPIView):
    """One service's day per tenant, task type and backend (GET)."""

    serializer_class = RunBreakdownSerializer
    filterset_class = RunBreakdownFilter

    def get_queryset(self) -> QuerySet[RunBreakdown]:
        return RunBreakdown.objects.none()  # the rows are the day's: see get()

    @extend_schema(
        summary="One service's day by tenant, task type and backend",
        parameters=[
            OpenApiParameter(
                "source",
                enum=RunSummary.Source.values,
                default=RunSummary.Source.GATEWAY,
                description="Whose day: the gateway's push (default) or the engine's scrape.",
            ),
        ],
        responses={
            200: RunBreakdownSerializer(many=True),
            404: OpenApiResponse(description="No such service, or that day was not recorded."),
        },
    )
    def get(self, request: Request, slug: str, date: str) -> Response:
        day = _day(date)
        source = request.query_params.get("source", RunSummary.Source.GATEWAY)
        if source not in RunSummary.Source.values:
            raise ValidationError(
                {"source": [f"source must be one of {', '.join(RunSummary.Source.values)}."]}
            )
        rows = queries.day_breakdown(slug, day, source)
        if rows is None:
            raise NotFound(f"{slug} has no {source} run summary for {day.isoformat()}.")
        rows = self.filter_queryset(rows)
        page = self.paginate_queryset(rows)
        data = RunBreakdownSerializer(page if page is not None else rows, many=True).data
        return self.get_paginated_response(data) if page is not None else Response(data)


def _day(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise ValidationError(
            {"date": [f"date must be a day, YYYY-MM-DD; got {text!r}."]}
        ) from None
