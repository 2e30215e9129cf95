"""Shapes of load-test evidence over REST (and in `import_loadtest`'s JSON output)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict, cast

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field, inline_serializer
from rest_framework import serializers

from ledger import queries
from ledger.importers import FORMATS
from ledger.models import LoadTestReport
from ledger.serializers.choices import NamedChoicesMixin

if TYPE_CHECKING:
    from django.contrib.auth.models import User
    from django_stubs_ext import WithAnnotations


@extend_schema_field(OpenApiTypes.BINARY)
class ReportFileField(serializers.FileField):
    """A file in a multipart body (documented as binary, not as the URL a response would hold)."""


class LoadTestUploadSerializer(NamedChoicesMixin, serializers.Serializer):
    """The multipart body of an upload."""

    workload = serializers.ChoiceField(
        choices=LoadTestReport.Workload.choices, help_text="The workload class the file measured."
    )
    # Empty files reach the importer, whose message names the file.
    file = ReportFileField(
        allow_empty_file=True,
        help_text="The report as the tool wrote it (JSON, JSON Lines or CSV).",
    )
    format = serializers.ChoiceField(
        choices=list(FORMATS),
        required=False,
        allow_null=True,
        help_text="Force an importer instead of detecting the format from the content.",
    )
    measured_at = serializers.DateTimeField(
        required=False, help_text="When the test ran; default: the time of the upload."
    )
    accept_mismatch = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=500,
        help_text="Only when the file measured another model, engine or GPU than the revision "
        "(the upload is refused otherwise, naming both sides): why it belongs here anyway. "
        "Recorded; the report is then `mismatched` and never current.",
    )
    metrics_before = ReportFileField(
        required=False,
        allow_empty_file=True,
        help_text="A scrape (Prometheus text) of the engine's or DCGM's /metrics taken before "
        "the test; with metrics_after, read for the GPU memory and KV-cache peaks the report "
        "itself does not record (the higher of the two scrapes: a lower bound on the peak).",
    )
    metrics_after = ReportFileField(
        required=False,
        allow_empty_file=True,
        help_text="The same scrape taken after the test.",
    )


class _StatusCache(TypedDict):
    """Set by `_status` on the report it serializes."""

    _api_status: queries.EvidenceStatus


def _status(report: LoadTestReport, context: dict[str, Any]) -> queries.EvidenceStatus:
    # `status` and `status_reason` share one computation per report per response.
    cached = cast("WithAnnotations[LoadTestReport, _StatusCache]", report)
    if not hasattr(cached, "_api_status"):
        cached._api_status = queries.evidence_status(report, now=context.get("now"))
    return cached._api_status


class DifferenceSerializer(serializers.Serializer):
    field = serializers.CharField(help_text="model, engine, gpu_model or gpu_count.")
    file = serializers.CharField(help_text="What the file says it measured.")
    revision = serializers.CharField(help_text="What the revision serves or runs on.")


# A serializer cannot declare a field named `fields`; the schema's shape is built inline.
MismatchSerializer = inline_serializer(
    name="Mismatch",
    fields={
        "fields": serializers.ListField(
            child=serializers.CharField(), help_text="model, engine, gpu_model, gpu_count."
        ),
        "reason": serializers.CharField(help_text="Why it was attached anyway, as recorded."),
        "differences": DifferenceSerializer(many=True),
    },
    allow_null=True,
)


class LoadTestReportSerializer(serializers.ModelSerializer):
    service = serializers.CharField(source="revision.service.slug", read_only=True)
    revision_label = serializers.CharField(source="revision.label", read_only=True)
    uploaded_by: serializers.SlugRelatedField[User] = serializers.SlugRelatedField(
        read_only=True,
        allow_null=True,
        slug_field="username",
        help_text="Username of who uploaded it; null when the system did, or the account is gone.",
    )
    status = serializers.SerializerMethodField(
        help_text="current; stale: older than the tier allows, or measured another "
        "fingerprint or hardware; mismatched: the file measured another model, engine or "
        "GPU and was attached with a recorded reason; unverified: the file names no model, so "
        "nothing checked that it measured the revision. Release gates accept current evidence, "
        "and unverified evidence below production (see counts_as_current)."
    )
    status_reason = serializers.SerializerMethodField()
    counts_as_current = serializers.SerializerMethodField(
        help_text="Whether release gates and readiness accept it as current evidence."
    )
    mismatch = serializers.SerializerMethodField(
        help_text="null, or what the file measured that differs from the revision and the "
        "recorded reason it was attached anyway."
    )

    class Meta:
        model = LoadTestReport
        fields = [
            "id",
            "service",
            "revision",
            "revision_label",
            "workload",
            "status",
            "status_reason",
            "counts_as_current",
            "model_verified",
            "mismatch",
            "tool",
            "tool_version",
            "format",
            "variant",
            "source",
            "filename",
            "raw_sha256",
            "raw_size",
            "fingerprint",
            "hardware",
            "measured_at",
            "created_at",
            "uploaded_by",
            "level_count",
            "requests",
            "errored",
            "error_rate",
            "ttft_p95_ms",
            "ttft_p99_ms",
            "tpot_p95_ms",
            "output_tokens_per_s",
            "concurrency",
            "gpu_memory_peak_gib",
            "kv_cache_peak_pct",
            "has_request_data",
            "goodput",
            "goodput_slo",
            "warnings",
        ]
        read_only_fields = fields

    def get_status(self, report: LoadTestReport) -> str:
        return _status(report, self.context).status

    def get_status_reason(self, report: LoadTestReport) -> str:
        return _status(report, self.context).reason

    def get_counts_as_current(self, report: LoadTestReport) -> bool:
        return _status(report, self.context).counts

    @extend_schema_field(MismatchSerializer)
    def get_mismatch(self, report: LoadTestReport) -> dict[str, Any] | None:
        return report.mismatch or None


class GoodputSerializer(serializers.Serializer):
    value = serializers.FloatField(allow_null=True, help_text="0 to 1, first load level.")
    reason = serializers.CharField(help_text="Why there is no value, when there is none.")


class CapacitySerializer(serializers.Serializer):
    axis = serializers.CharField(allow_null=True)
    load = serializers.FloatField(allow_null=True)
    level = serializers.CharField(allow_null=True)
    output_tokens_per_s = serializers.FloatField(allow_null=True)
    gpu_count = serializers.IntegerField(allow_null=True)
    gpu_hours_per_million_output_tokens = serializers.FloatField(allow_null=True)
    levels_within_slo = serializers.IntegerField()
    levels = serializers.IntegerField()
    reason = serializers.CharField()


class LoadTestReportDetailSerializer(LoadTestReportSerializer):
    """One report with everything parsed, and what it says against today's SLOs."""

    results = serializers.JSONField(
        read_only=True,
        help_text="Every load level: conditions, latency percentiles (ms), throughput.",
    )
    goodput_now = serializers.SerializerMethodField(
        help_text="Goodput against the service's SLOs of today (recomputed if they changed)."
    )
    capacity = serializers.SerializerMethodField(
        help_text="Highest load within today's SLOs, and GPU-hours per million output tokens there."
    )

    class Meta(LoadTestReportSerializer.Meta):
        fields = [*LoadTestReportSerializer.Meta.fields, "goodput_now", "capacity", "results"]
        read_only_fields = fields

    @extend_schema_field(GoodputSerializer)
    def get_goodput_now(self, report: LoadTestReport) -> dict[str, Any]:
        return queries.report_goodput(report)._asdict()

    @extend_schema_field(CapacitySerializer)
    def get_capacity(self, report: LoadTestReport) -> dict[str, Any]:
        return dict(queries.report_capacity(report))
