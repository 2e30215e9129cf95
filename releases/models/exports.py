"""What an auditor asked to export, and the file a worker built for it.

A request is a row in state `queued`; the `build_export` task claims it
(queued → building, a conditional UPDATE), writes the file into the default
storage (S3 through django-storages, or the local media folder), and marks it
`ready` with the file's sha256, its size and the chain head it covers — or
`failed` with the reason. Progress (0 to 100 and what is being written) is kept
on the row, so the page can show it while the worker builds.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from lib.choices import ChoiceLabels


class ExportQuerySet(models.QuerySet):
    def for_page(self) -> ExportQuerySet:
        return self.select_related("requested_by")


class Export(ChoiceLabels, models.Model):
    class Format(models.TextChoices):
        CSV = "csv", _("CSV (one file per record type, zipped)")
        JSONL = "jsonl", _("JSON Lines (one file per record type, zipped)")
        BUNDLE = "bundle", _("Evidence bundle (signed, verifiable offline)")

    class State(models.TextChoices):
        QUEUED = "queued", _("Queued")
        BUILDING = "building", _("Building")
        READY = "ready", _("Ready")
        FAILED = "failed", _("Failed")

    FINISHED_STATES = ("ready", "failed")

    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="exports"
    )
    format = models.CharField(max_length=8, choices=Format.choices)
    period_start = models.DateTimeField(help_text=_("Records from this moment, inclusive."))
    period_end = models.DateTimeField(help_text=_("Records before this moment."))
    filters = models.JSONField(
        default=dict,
        blank=True,
        help_text=_("The filters besides the period: service, tier, change_kind, path, state."),
    )
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    progress = models.PositiveSmallIntegerField(default=0, help_text=_("Percent done."))
    progress_note = models.CharField(max_length=200, blank=True)
    file = models.FileField(upload_to="exports/", blank=True, max_length=300)
    filename = models.CharField(
        max_length=200, blank=True, help_text=_("The name it downloads as.")
    )
    sha256 = models.CharField(max_length=64, blank=True)
    size = models.PositiveBigIntegerField(null=True, blank=True)
    chain_head_sequence = models.PositiveBigIntegerField(null=True, blank=True)
    chain_head_hash = models.CharField(max_length=64, blank=True)
    record_counts = models.JSONField(
        default=dict, blank=True, help_text=_("Records written, per record type.")
    )
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = ExportQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(format__in=["csv", "jsonl", "bundle"]),
                name="releases_export_format_valid",
            ),
            models.CheckConstraint(
                condition=Q(state__in=["queued", "building", "ready", "failed"]),
                name="releases_export_state_valid",
            ),
            models.CheckConstraint(
                condition=Q(period_end__gt=models.F("period_start")),
                name="releases_export_period_ends_after_start",
                violation_error_message="The period must end after it starts.",
            ),
            models.CheckConstraint(
                condition=Q(progress__lte=100), name="releases_export_progress_percent"
            ),
            # A ready export has its file and the proof of what it covers.
            models.CheckConstraint(
                condition=~Q(state="ready")
                | (~Q(file="") & ~Q(sha256="") & Q(chain_head_sequence__isnull=False)),
                name="releases_export_ready_has_file",
            ),
        ]
        indexes = [
            # The exports list, newest first.
            models.Index(fields=["-created_at", "-id"], name="releases_export_recent_idx"),
        ]

    def __str__(self) -> str:
        return f"export #{self.pk} ({self.format})"

    @property
    def finished(self) -> bool:
        return self.state in self.FINISHED_STATES
