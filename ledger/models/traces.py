"""Model calls seen in OpenTelemetry traces: structured facts only, never content.

One row per span of a model call (`gen_ai.operation.name` chat or text_completion),
as `ledger.traces.otlp` extracts it from an OTLP export. Prompt and completion
content never reaches this table: it is dropped at ingest (`ledger.traces.otlp`).

On PostgreSQL the table is partitioned by day on `started_at` (declarative range
partitioning; `ledger.traces.partitions` creates each day's partition on first use
and the retention sweep drops whole partitions); on SQLite it is a plain table. The
primary key holds the partition key, as PostgreSQL requires of a partitioned table.
"""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _


class ModelCallSpan(models.Model):
    pk = models.CompositePrimaryKey("started_at", "trace_id", "span_id")
    started_at = models.DateTimeField()
    trace_id = models.CharField(max_length=32, help_text=_("32 lower-case hex digits."))
    span_id = models.CharField(max_length=16, help_text=_("16 lower-case hex digits."))
    parent_span_id = models.CharField(max_length=16, blank=True)
    name = models.CharField(max_length=200, blank=True)
    duration_ms = models.FloatField()
    operation = models.CharField(max_length=40, help_text=_("gen_ai.operation.name"))
    request_model = models.CharField(max_length=200, blank=True)
    response_model = models.CharField(max_length=200, blank=True)
    server_address = models.CharField(max_length=255, blank=True)
    server_port = models.PositiveIntegerField(null=True, blank=True)
    input_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    output_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    finish_reasons = models.JSONField(default=list, blank=True)
    error_type = models.CharField(max_length=200, blank=True)
    ttft_ms = models.FloatField(
        null=True, blank=True, help_text=_("gen_ai.response.time_to_first_chunk, in ms.")
    )
    latency_ms = models.JSONField(
        default=dict,
        blank=True,
        help_text=_("The engine's gen_ai.latency.* figures when it sent them, in ms."),
    )
    # What the gateway says of the request (the ledger.* span attributes), when it says.
    service_slug = models.CharField(max_length=100, blank=True)
    tenant = models.CharField(max_length=100, blank=True)
    task_type = models.CharField(max_length=40, blank=True)
    gateway_policy_version = models.CharField(max_length=40, blank=True)
    degradation = models.CharField(max_length=100, blank=True)
    retry_count = models.PositiveIntegerField(null=True, blank=True)
    resource_service = models.CharField(
        max_length=200, blank=True, help_text=_("The exporter's service.name.")
    )

    class Meta:
        db_table = "ledger_modelcallspan"
        ordering = ["started_at"]
        indexes = [
            models.Index(fields=["trace_id"], name="ledger_mcs_trace_idx"),
            models.Index(fields=["service_slug", "started_at"], name="ledger_mcs_service_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.operation} {self.request_model} ({self.trace_id}/{self.span_id})"
