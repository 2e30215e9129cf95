"""The gray rollout of an approved release: its stages, and what was observed in each.

A release's gray plan (`Release.gray_stages`) is copied into Stage rows when the
rollout starts, so what was planned and what was carried out sit side by side
and the plan cannot change under a running rollout. Each observation posted for
the current stage is stored with its verdict and every guard's judgement:
controllers discard theirs, the ledger must not.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from lib.choices import ChoiceLabels


class Stage(ChoiceLabels, models.Model):
    class State(models.TextChoices):
        PENDING = "pending", _("Pending")
        OBSERVING = "observing", _("Observing")
        HELD = "held", _("Held")
        BREACHED = "breached", _("Breached")
        PROMOTED = "promoted", _("Promoted")
        COMPLETED = "completed", _("Completed")
        ABORTED = "aborted", _("Aborted")
        ROLLED_BACK = "rolled_back", _("Rolled back")

    # The stage carries traffic in these states.
    ACTIVE_STATES = ("observing", "held", "breached")

    release = models.ForeignKey("releases.Release", on_delete=models.CASCADE, related_name="stages")
    number = models.PositiveSmallIntegerField(help_text=_("1 for the first stage of the plan."))
    traffic_pct = models.DecimalField(max_digits=5, decimal_places=2)
    observation_minutes = models.PositiveIntegerField()
    guards = models.JSONField(
        default=list,
        blank=True,
        help_text=_(
            "The stage's guards as judged: [{metric, max, max_increase_pct, min_requests, "
            "critical, dry_run}] (releases.guards.GuardSpec)."
        ),
    )
    failure_limit = models.PositiveSmallIntegerField(
        default=1, help_text=_("Failed observations tolerated; one more breaches the stage.")
    )
    error_limit = models.PositiveSmallIntegerField(
        default=2, help_text=_("Observations whose metrics source failed, tolerated.")
    )
    analysis = models.JSONField(
        default=dict,
        blank=True,
        help_text=_(
            "The stage's analysis with its defaults: {source, interval_s, "
            "consecutive_error_limit, on_breach, auto_promote, queries} "
            "(releases.stage_analysis.AnalysisSpec); empty: judged from posted observations only."
        ),
    )
    analysis_paused_at = models.DateTimeField(null=True, blank=True)
    analysis_paused_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text=_("Who paused the analysis; empty when it stopped itself (the reason says why)."),
    )
    analysis_pause_reason = models.TextField(blank=True)
    state = models.CharField(max_length=12, choices=State.choices, default=State.PENDING)
    state_reason = models.TextField(blank=True)
    held_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text=_("Who held the stage; empty while an inconclusive observation holds it."),
    )
    started_at = models.DateTimeField(null=True, blank=True)
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    ended_at = models.DateTimeField(null=True, blank=True)
    ended_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    class Meta:
        ordering = ["release", "number"]
        constraints = [
            models.UniqueConstraint(
                fields=["release", "number"], name="releases_stage_number_unique"
            ),
            models.CheckConstraint(
                condition=Q(number__gte=1), name="releases_stage_number_positive"
            ),
            models.CheckConstraint(
                condition=Q(traffic_pct__gt=0, traffic_pct__lte=100),
                name="releases_stage_traffic_in_range",
            ),
            models.CheckConstraint(
                condition=Q(
                    state__in=[
                        "pending",
                        "observing",
                        "held",
                        "breached",
                        "promoted",
                        "completed",
                        "aborted",
                        "rolled_back",
                    ]
                ),
                name="releases_stage_state_valid",
            ),
            models.CheckConstraint(
                condition=Q(state="pending") | Q(started_at__isnull=False),
                name="releases_stage_started_has_time",
            ),
            # One stage of a release carries the rollout at a time.
            models.UniqueConstraint(
                fields=["release"],
                condition=Q(state__in=["observing", "held", "breached"]),
                name="releases_stage_one_active",
            ),
        ]
        indexes = [
            # The rollouts in flight with a breached or held stage (home, catalog, gauges).
            models.Index(fields=["state"], name="releases_stage_state_idx"),
        ]

    def __str__(self) -> str:
        return f"stage {self.number} of release #{self.release_id}"

    @property
    def analysis_running(self) -> bool:
        return bool(self.analysis) and self.analysis_paused_at is None

    @property
    def is_full(self) -> bool:
        return self.traffic_pct >= 100


class Observation(ChoiceLabels, models.Model):
    """The candidate and the live baseline measured side by side over one window.

    `candidate` and `baseline` hold aggregates ({requests, ttft_p95_ms, …}); raw
    per-request TTFTs, when given, are kept beside them so the two-sample test
    behind a relative verdict can be recomputed.
    """

    class Verdict(models.TextChoices):
        PASS = "pass", _("Pass")
        FAIL = "fail", _("Fail")
        INCONCLUSIVE = "inconclusive", _("Inconclusive")
        ERROR = "error", _("Error")

    stage = models.ForeignKey(Stage, on_delete=models.CASCADE, related_name="observations")
    window_start = models.DateTimeField()
    window_end = models.DateTimeField()
    source = models.CharField(
        max_length=60, blank=True, help_text=_("Who measured: gateway, prometheus, a person, …")
    )
    candidate = models.JSONField(default=dict)
    baseline = models.JSONField(default=dict, blank=True)
    candidate_ttft_ms = models.JSONField(default=list, blank=True)
    baseline_ttft_ms = models.JSONField(default=list, blank=True)
    source_error = models.TextField(
        blank=True, help_text=_("The metrics source failed: why. The observation is an error.")
    )
    verdict = models.CharField(max_length=12, choices=Verdict.choices)
    guard_results = models.JSONField(default=list, blank=True)
    analysis_window = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text=_(
            "The analysis tick's window, counted from the stage's start in intervals; one "
            "observation per window (empty for a posted observation)."
        ),
    )
    measurement = models.JSONField(
        default=dict,
        blank=True,
        help_text=_(
            "How the analysis measured: the queries sent and the sha256 of each raw answer."
        ),
    )
    posted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["stage", "created_at", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(window_end__gt=models.F("window_start")),
                name="releases_observation_window_ordered",
                violation_error_message="The window must end after it starts.",
            ),
            models.CheckConstraint(
                condition=Q(verdict__in=["pass", "fail", "inconclusive", "error"]),
                name="releases_observation_verdict_valid",
            ),
            # No decision twice: one analysis observation per stage and window.
            models.UniqueConstraint(
                fields=["stage", "analysis_window"],
                condition=Q(analysis_window__isnull=False),
                name="releases_observation_one_per_window",
            ),
        ]

    def __str__(self) -> str:
        return f"observation {self.pk} of {self.stage}"
