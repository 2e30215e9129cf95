"""Load-test evidence over REST: CI pipelines upload reports; anyone signed in reads them.

Registered in config/api_router.py:

    router.register("loadtests", ledger_evidence.LoadTestReportViewSet, basename="loadtest")
    path("revisions/<int:revision_id>/loadtests/", ledger_evidence.RevisionLoadTestUploadView.as_view(),
         name="revision_loadtests")

Uploads call `services.import_loadtest_report` as the requester, which checks
who may attach evidence; refusals come back as 400 (naming the file and the
line or JSON path), 413 (over LOADTEST_MAX_UPLOAD_BYTES) or 403.
"""

from __future__ import annotations

import django_filters
from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import exceptions, status, viewsets
from rest_framework.generics import GenericAPIView
from rest_framework.request import Request
from rest_framework.response import Response

from ledger import permissions, services
from ledger.models import LoadTestReport, Revision
from ledger.serializers import (
    LoadTestReportDetailSerializer,
    LoadTestReportSerializer,
    LoadTestUploadSerializer,
)
from lib.api import ApiFilterSet, DomainVerbMixin, FormParser, MultiPartParser


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The file is larger than the upload limit."
    default_code = "too_large"


def _too_large(detail) -> bool:
    if not isinstance(detail, dict):
        return False
    return any(getattr(error, "code", None) == "too_large" for error in detail.get("file", []))


class LoadTestReportFilter(ApiFilterSet):
    service = django_filters.CharFilter(
        field_name="revision__service__slug", help_text="Service slug."
    )

    class Meta:
        model = LoadTestReport
        fields = ["revision", "workload", "tool", "format"]


@extend_schema_view(
    list=extend_schema(summary="Load-test reports, newest first, with current/stale status"),
    retrieve=extend_schema(
        summary="One load-test report: every level, goodput and capacity against today's SLOs"
    ),
)
class LoadTestReportViewSet(viewsets.ReadOnlyModelViewSet):
    """Evidence attached to revisions. Upload with POST /api/revisions/{id}/loadtests/."""

    serializer_class = LoadTestReportSerializer
    filterset_class = LoadTestReportFilter

    def get_queryset(self):
        reports = LoadTestReport.objects.with_context()
        if self.action == "list":
            # Every level of every report is a lot of JSON for a list that shows none of it.
            reports = reports.defer("results")
        return reports

    def get_serializer_class(self):
        if self.action == "retrieve":
            return LoadTestReportDetailSerializer
        return LoadTestReportSerializer

    def get_serializer_context(self):
        # One "now" per response: every report of a page is judged at the same instant.
        return {**super().get_serializer_context(), "now": timezone.now()}


class RevisionLoadTestUploadView(DomainVerbMixin, GenericAPIView):
    """Attach a load-test report to a revision (multipart)."""

    parser_classes = [MultiPartParser, FormParser]
    serializer_class = LoadTestUploadSerializer
    queryset = Revision.objects.all()

    @extend_schema(
        summary="Upload a load-test report for one workload class of a revision",
        request={"multipart/form-data": LoadTestUploadSerializer},
        responses={
            201: OpenApiResponse(LoadTestReportDetailSerializer, description="Imported."),
            200: OpenApiResponse(
                LoadTestReportDetailSerializer,
                description="This file was already attached to this revision: the existing report.",
            ),
            400: OpenApiResponse(
                description="Bad input: the message names the file and the line or JSON path."
            ),
            403: OpenApiResponse(description="Only model owners of the service's team may upload."),
            413: OpenApiResponse(description="The file is over LOADTEST_MAX_UPLOAD_BYTES."),
        },
    )
    def post(self, request: Request, revision_id: int) -> Response:
        revision = get_object_or_404(
            Revision.objects.select_related("service__team"), pk=revision_id
        )
        # Who may, before what was sent is even read: a refused caller learns nothing
        # about the payload's faults.
        self.call_verb(permissions.ensure_can_attach_evidence, revision)
        upload = self.get_serializer(data=request.data)
        upload.is_valid(raise_exception=True)
        fields = upload.validated_data
        file = fields["file"]
        try:
            report, created = self.call_verb(
                services.import_loadtest_report,
                revision,
                workload=fields["workload"],
                file=file,
                filename=file.name,
                format=fields.get("format"),
                measured_at=fields.get("measured_at"),
                accept_mismatch=fields.get("accept_mismatch", ""),
                metrics_before=fields.get("metrics_before"),
                metrics_after=fields.get("metrics_after"),
            )
        except exceptions.ValidationError as exc:
            if _too_large(exc.detail):
                raise PayloadTooLarge(exc.detail) from exc
            raise
        report = LoadTestReport.objects.with_context().get(pk=report.pk)
        data = LoadTestReportDetailSerializer(
            report, context={**self.get_serializer_context(), "now": timezone.now()}
        ).data
        return Response(data, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)
