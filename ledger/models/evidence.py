"""Load-test evidence: the reports benchmark tools wrote, kept as written and parsed.

A report belongs to one revision and one workload class. The raw file is in
the default storage (S3 when configured) under
`loadtest/<revision id>/<sha256>/<original filename>`; the parsed form is the
importer's `ParsedReport.to_json()`; a few numbers of the first load level are
columns, because lists and gates filter and sort on them.
"""

from __future__ import annotations

import io
import posixpath
from typing import Any, TypedDict

import numpy as np
from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.text import get_valid_filename
from django.utils.translation import gettext_lazy as _

from ledger.models.registry import Revision
from lib.choices import ChoiceLabels


class RequestLevel(TypedDict):
    """One load level's per-request numbers: ms (NaN where missing), and error flags."""

    ttft: np.ndarray | None
    tpot: np.ndarray | None
    error: np.ndarray


# The raw file's name inside its key is cut to this; the key stays under the column's limit.
_KEY_NAME_MAX = 150


def raw_file_key(report: LoadTestReport, filename: str) -> str:
    """`loadtest/<revision id>/<sha256>/<filename>`: one folder per file content and revision."""
    name = get_valid_filename(posixpath.basename(filename.replace("\\", "/")) or "report")
    stem, dot, ext = name.rpartition(".")
    if len(name) > _KEY_NAME_MAX:
        name = f"{stem[: _KEY_NAME_MAX - len(ext) - 1]}.{ext}" if dot else name[:_KEY_NAME_MAX]
    return f"loadtest/{report.revision_id}/{report.raw_sha256}/{name}"


class LoadTestReportQuerySet(models.QuerySet):
    def with_context(self) -> LoadTestReportQuerySet:
        """What `evidence_status` and the API read: the revision, its service and runtime."""
        return self.select_related("revision__service", "revision__runtime", "uploaded_by")


class LoadTestReport(ChoiceLabels, models.Model):
    """One load-test file attached to a revision as evidence for one workload class."""

    class Workload(models.TextChoices):
        SHORT = "short", _("Short prompts")
        HIGH_CONCURRENCY = "high_concurrency", _("High concurrency")
        LONG_CONTEXT = "long_context", _("Long context")
        BATCH = "batch", _("Batch")
        STRUCTURED = "structured", _("Structured output")
        STREAMING = "streaming", _("Streaming")

    class Source(models.TextChoices):
        COMPUTED = "computed", _("Computed here from per-request data")
        TOOL = "tool", _("The tool's own summary")

    revision = models.ForeignKey(
        Revision, on_delete=models.PROTECT, related_name="loadtest_reports"
    )
    workload = models.CharField(max_length=20, choices=Workload.choices)
    tool = models.CharField(
        max_length=40, help_text=_("The tool that wrote the file, e.g. guidellm.")
    )
    tool_version = models.CharField(max_length=40, blank=True)
    format = models.CharField(max_length=20, help_text=_("The importer that read it."))
    variant = models.CharField(max_length=40, help_text=_("Which of the tool's files it was."))
    source = models.CharField(max_length=8, choices=Source.choices)
    raw_file = models.FileField(upload_to=raw_file_key, max_length=300)
    raw_sha256 = models.CharField("raw file SHA-256", max_length=64)
    raw_size = models.PositiveBigIntegerField("raw file size (bytes)")
    filename = models.CharField(max_length=255, help_text=_("The file's name as uploaded."))
    fingerprint = models.CharField(
        max_length=71, help_text=_("The revision's fingerprint when it was measured.")
    )
    hardware = models.JSONField(
        default=dict,
        help_text=_('{"gpu_model", "gpu_count", "gpu_memory_gb", "source": "runtime" | "file"}'),
    )
    measured_at = models.DateTimeField(default=timezone.now)
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    results = models.JSONField(
        help_text=_("ParsedReport.to_json(): every level with its conditions and results.")
    )
    warnings = models.JSONField(default=list, blank=True)
    mismatch = models.JSONField(
        default=dict,
        blank=True,
        help_text=_(
            "Empty, or when the file measured another model, engine or GPU and was "
            'attached anyway: {"fields", "reason", "differences"} (queries.Mismatch).'
        ),
    )
    model_verified = models.BooleanField(
        default=True,
        help_text=_(
            "False when the file names no model, so the import could not check it against "
            "the revision: the report is unverified and production gates do not count it."
        ),
    )
    # The first load level, as columns (see LoadTestReport.headline_level).
    level_count = models.PositiveSmallIntegerField(default=1)
    requests = models.PositiveIntegerField(null=True, blank=True)
    errored = models.PositiveIntegerField(null=True, blank=True)
    error_rate = models.FloatField(null=True, blank=True, help_text=_("0 to 1."))
    ttft_p95_ms = models.FloatField("p95 TTFT (ms)", null=True, blank=True)
    ttft_p99_ms = models.FloatField("p99 TTFT (ms)", null=True, blank=True)
    tpot_p95_ms = models.FloatField("p95 TPOT (ms)", null=True, blank=True)
    output_tokens_per_s = models.FloatField(null=True, blank=True)
    concurrency = models.FloatField(
        null=True,
        blank=True,
        help_text=_(
            "Concurrent requests the first level ran at, as the tool set it; empty when the "
            "level was driven by a request rate alone."
        ),
    )
    # Where each peak came from is in results["peaks"] (ledger.metrics_import.peaks).
    gpu_memory_peak_gib = models.FloatField(
        _("peak GPU memory (GiB)"),
        null=True,
        blank=True,
        help_text=_(
            "Highest memory used on any one GPU during the test, in GiB: the tool's own GPU "
            "telemetry when its file records it, else the higher of two DCGM scrapes "
            "(DCGM_FI_DEV_FB_USED) taken before and after the test, which is only a lower "
            "bound on the true peak."
        ),
    )
    kv_cache_peak_pct = models.FloatField(
        _("peak KV-cache use (%)"),
        null=True,
        blank=True,
        help_text=_(
            "Highest share of the engine's KV cache in use, 0 to 100: the higher of two "
            "scrapes of the engine's usage gauge (vLLM kv_cache_usage_perc, SGLang "
            "token_usage) taken before and after the test. Engines expose only the current "
            "use, so this is a lower bound on the true peak."
        ),
    )
    has_request_data = models.BooleanField(
        default=False, help_text=_("The file had per-request data (kept in LoadTestRequestData).")
    )
    goodput = models.FloatField(
        null=True, blank=True, help_text=_("First level: share of requests within goodput_slo.")
    )
    goodput_reason = models.CharField(
        max_length=200, blank=True, help_text=_("Why there is no goodput, when there is none.")
    )
    goodput_levels = models.JSONField(default=list, blank=True)
    goodput_slo = models.JSONField(
        default=dict,
        blank=True,
        help_text=_('The SLOs goodput was computed against: {"ttft_ms", "tpot_ms"}.'),
    )

    objects = LoadTestReportQuerySet.as_manager()

    class Meta:
        ordering = ["-measured_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["revision", "raw_sha256"], name="ledger_loadtestreport_raw_unique"
            ),
            models.CheckConstraint(
                condition=Q(
                    workload__in=[
                        "short",
                        "high_concurrency",
                        "long_context",
                        "batch",
                        "structured",
                        "streaming",
                    ]
                ),
                name="ledger_loadtestreport_workload_valid",
            ),
            models.CheckConstraint(
                condition=Q(source__in=["computed", "tool"]),
                name="ledger_loadtestreport_source_valid",
            ),
            models.CheckConstraint(
                condition=Q(raw_sha256__regex=r"^[0-9a-f]{64}$"),
                name="ledger_loadtestreport_sha256_format",
            ),
            models.CheckConstraint(
                condition=Q(error_rate__isnull=True) | Q(error_rate__gte=0, error_rate__lte=1),
                name="ledger_loadtestreport_error_rate_fraction",
            ),
            models.CheckConstraint(
                condition=Q(goodput__isnull=True) | Q(goodput__gte=0, goodput__lte=1),
                name="ledger_loadtestreport_goodput_fraction",
            ),
            models.CheckConstraint(
                condition=Q(level_count__gte=1), name="ledger_loadtestreport_has_levels"
            ),
            models.CheckConstraint(
                condition=Q(kv_cache_peak_pct__isnull=True)
                | Q(kv_cache_peak_pct__gte=0, kv_cache_peak_pct__lte=100),
                name="ledger_loadtestreport_kv_cache_peak_percent",
            ),
            models.CheckConstraint(
                condition=Q(gpu_memory_peak_gib__isnull=True) | Q(gpu_memory_peak_gib__gte=0),
                name="ledger_loadtestreport_gpu_memory_peak_positive",
            ),
            # A mismatch is attached only with its reason recorded.
            models.CheckConstraint(
                condition=Q(mismatch={}) | Q(mismatch__has_key="reason"),
                name="ledger_loadtestreport_mismatch_has_reason",
            ),
        ]
        indexes = [
            # current_reports(revision) and the SLO matrix: "newest reports of these
            # revisions, per workload class".
            models.Index(
                fields=["revision", "workload", "-measured_at"], name="ledger_ltr_rev_workload_idx"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.filename} ({self.workload})"

    @property
    def levels(self) -> list[dict]:
        return self.results.get("levels", [])

    @property
    def headline_level(self) -> dict | None:
        """The level the columns describe: the first (a sweep's lowest load)."""
        levels = self.levels
        return levels[0] if levels else None


class LoadTestRequestData(models.Model):
    """Per-request TTFT, TPOT and errors of a report, compact enough to recompute goodput.

    Kept apart from the report so that lists never load it. `arrays` is a
    compressed NumPy archive (`np.savez_compressed`) with, for each level i,
    `ttft_<i>` and `tpot_<i>` (float32 ms, NaN where a request has none) and
    `error_<i>` (bool); about 9 bytes a request before compression.
    """

    report = models.OneToOneField(
        LoadTestReport, on_delete=models.CASCADE, primary_key=True, related_name="request_data"
    )
    request_count = models.PositiveIntegerField()
    arrays = models.BinaryField()

    def __str__(self) -> str:
        return f"{self.request_count} requests of {self.report_id}"

    @staticmethod
    def pack(levels: list[RequestLevel]) -> bytes:
        """The `arrays` bytes for levels shaped as `levels()` returns them."""
        named: dict[str, np.ndarray] = {}
        for i, level in enumerate(levels):
            named[f"error_{i}"] = np.asarray(level["error"], dtype=bool)
            for key, values in (("ttft", level["ttft"]), ("tpot", level["tpot"])):
                if values is not None:
                    named[f"{key}_{i}"] = np.asarray(values, dtype=np.float32)
        buffer = io.BytesIO()
        arrays: dict[str, Any] = named  # numpy's stub types **kwds as its `allow_pickle` flag
        np.savez_compressed(buffer, **arrays)
        return buffer.getvalue()

    @staticmethod
    def unpack(data: bytes) -> list[RequestLevel]:
        """[{"ttft": array | None, "tpot": array | None, "error": array}, ...], one per level."""
        with np.load(io.BytesIO(bytes(data)), allow_pickle=False) as archive:
            found = dict(archive.items())
        count = sum(1 for name in found if name.startswith("error_"))
        return [
            {
                "ttft": found.get(f"ttft_{i}"),
                "tpot": found.get(f"tpot_{i}"),
                "error": found[f"error_{i}"],
            }
            for i in range(count)
        ]

    def levels(self) -> list[RequestLevel]:
        return self.unpack(self.arrays)
