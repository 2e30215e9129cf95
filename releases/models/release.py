"""The release form: one candidate revision of one service on its way to production.

Field groups follow the form's sections. List-like parts a page edits as a
whole and no query filters on (impact lists, failure classifications, gray
stages and their guards, rollback triggers, decommission moves, the logging
policy, metrics declared) are JSON columns validated with jsonschema by
`releases.schemas` in the verbs; what queries filter or join on (service,
revisions, state, path, filer, times) are columns. Sign-offs, waivers and
comments are child rows, because pages list and count them.
"""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _
from django.utils.translation import gettext_noop

from lib.choices import ChoiceLabels
from releases import transitions


class ReleaseQuerySet(models.QuerySet):
    def past_draft(self) -> ReleaseQuerySet:
        return self.exclude(state=Release.State.DRAFT)

    def in_flight(self) -> ReleaseQuerySet:
        """Rolling out: a stage of it carries traffic."""
        return self.filter(state=Release.State.ROLLING_OUT)

    def open(self) -> ReleaseQuerySet:
        """Not yet finished: a draft, or on its way (submitted, approved, rolling out)."""
        return self.filter(state__in=Release.OPEN_STATES)


class Release(ChoiceLabels, models.Model):
    class State(models.TextChoices):
        DRAFT = "draft", _("Draft")
        SUBMITTED = "submitted", _("Submitted")
        APPROVED = "approved", _("Approved")
        ROLLING_OUT = "rolling_out", _("Rolling out")
        RELEASED = "released", _("Released")
        REJECTED = "rejected", _("Rejected")
        WITHDRAWN = "withdrawn", _("Withdrawn")
        ABORTED = "aborted", _("Aborted")
        ROLLED_BACK = "rolled_back", _("Rolled back")

    # English wherever it is written (gate reasons and so the snapshot hash, emails, the
    # API): gettext_noop only puts it in the catalog; pages translate it when they show it.
    class ChangeKind(models.TextChoices):
        MODEL_UPGRADE = "model_upgrade", gettext_noop("Model upgrade")
        ENGINE_UPGRADE = "engine_upgrade", gettext_noop("Engine upgrade")
        QUANTIZATION_SWITCH = "quantization_switch", gettext_noop("Quantization switch")
        LAUNCH_PARAMETERS = "launch_parameters", gettext_noop("Launch-parameter change")
        ROUTING = "routing", gettext_noop("Routing change")
        CAPACITY = "capacity", gettext_noop("Capacity change")
        DECOMMISSION = "decommission", gettext_noop("Decommission")

    class Risk(models.TextChoices):
        LOW = "low", _("Low")
        MEDIUM = "medium", _("Medium")
        HIGH = "high", _("High")

    # English wherever it is written (gate reasons and so the snapshot hash, emails, the
    # API): gettext_noop only puts it in the catalog; pages translate it when they show it.
    class Path(models.TextChoices):
        STANDARD = "standard", gettext_noop("Standard (pre-approved change)")
        NORMAL = "normal", gettext_noop("Normal")
        EMERGENCY = "emergency", gettext_noop("Emergency")

    # English wherever it is written (gate reasons and so the snapshot hash, emails, the
    # API): gettext_noop only puts it in the catalog; pages translate it when they show it.
    class RollbackKind(models.TextChoices):
        ENGINE = "engine", gettext_noop("Engine")
        MODEL = "model", gettext_noop("Model")
        GATEWAY_POLICY = "gateway_policy", gettext_noop("Gateway policy")

    class CloseCode(models.TextChoices):
        SUCCESSFUL = "successful", _("Successful")
        SUCCESSFUL_WITH_ISSUES = "successful_with_issues", _("Successful with issues")
        FAILED = "failed", _("Failed")
        ROLLED_BACK = "rolled_back", _("Rolled back")

    OPEN_STATES = ("draft", "submitted", "approved", "rolling_out")
    # States a release ends in once it went live or tried to.
    FINISHED_STATES = ("released", "aborted", "rolled_back")

    # -- what changes
    service = models.ForeignKey("ledger.Service", on_delete=models.PROTECT, related_name="releases")
    from_revision = models.ForeignKey(
        "ledger.Revision",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text=_("The live revision when the release was filed (set by the ledger)."),
    )
    to_revision = models.ForeignKey(
        "ledger.Revision",
        on_delete=models.PROTECT,
        related_name="releases",
        help_text=_("The candidate revision."),
    )
    change_kind = models.CharField(max_length=20, choices=ChangeKind.choices)
    risk = models.CharField(
        max_length=8,
        choices=Risk.choices,
        blank=True,
        help_text=_("Empty: the risk suggested from the change kind and tier applies."),
    )
    risk_override_reason = models.TextField(
        blank=True, help_text=_("Why the risk differs from the one suggested.")
    )
    summary = models.TextField(help_text=_("What changes and why, for the reviewers."))

    # -- impact
    impact_tenants = models.JSONField(default=list, blank=True, help_text=_("Tenant names."))
    impact_task_types = models.JSONField(default=list, blank=True, help_text=_("Task type slugs."))
    impact_downstream = models.JSONField(
        default=list,
        blank=True,
        help_text=_(
            "Downstream systems touched: front_end, agent_runtime, tool_registry, "
            "dataagent, trace, eval, security, cost_view."
        ),
    )
    impact_dismissed = models.JSONField(
        default=list,
        blank=True,
        help_text=_(
            "Systems the diff suggests that this change does not touch, each with why: "
            '[{"system": "eval", "reason": "…"}].'
        ),
    )

    # -- evidence
    required_sample_sets = models.JSONField(
        default=list, blank=True, help_text=_("Names of the replay sample sets that must pass.")
    )
    known_limitations = models.TextField(blank=True)
    compatible_request_formats = models.TextField(blank=True)
    metrics_declared = models.JSONField(
        default=list,
        blank=True,
        help_text=_(
            "Metrics the revision exports: ttft, tpot, tokens_per_s, queue_length, "
            "gpu_memory, kv_cache_usage, error_rate."
        ),
    )
    failure_classifications = models.JSONField(
        default=list,
        blank=True,
        help_text=_(
            '[{"sample_set", "sample", "classification": "blocks" | "degradation" | '
            '"risk_accepted", "degradation": "which", "note"}]'
        ),
    )

    # -- gray plan: [{"traffic_pct", "observation_minutes", "guards": {...}}] in order
    gray_stages = models.JSONField(default=list, blank=True)

    # -- rollback plan
    rollback_target = models.ForeignKey(
        "ledger.Revision",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text=_("Empty: the live revision."),
    )
    rollback_kind = models.CharField(max_length=16, choices=RollbackKind.choices, blank=True)
    rollback_triggers = models.JSONField(
        default=list, blank=True, help_text=_("Conditions that trigger a rollback, one a line.")
    )
    rollback_expected_minutes = models.PositiveIntegerField(null=True, blank=True)
    rollback_impact_scope = models.TextField(blank=True)
    rollback_verification_set = models.CharField(
        max_length=100, blank=True, help_text=_("Sample set that verifies the rollback target.")
    )

    # -- capacity
    planned_peak_rps = models.FloatField(
        "planned peak rate (requests/s)",
        null=True,
        blank=True,
        validators=[MinValueValidator(0.1), MaxValueValidator(100_000)],
        help_text=_(
            "Capacity change: the peak arrival rate the new capacity is for. A drill of the "
            "candidate must then have met every task type's bounds at this rate."
        ),
    )

    # -- retirement
    retirement_plan = models.TextField(
        blank=True,
        help_text=_(
            "How this revision will be retired: what triggers it, the notice tenants get, "
            "where their traffic goes. Production needs one before going live."
        ),
    )

    # -- decommission: [{"kind": "tenant" | "task_type" | "sample_set", "name", "moved_to"}]
    decommission_moves = models.JSONField(default=list, blank=True)

    # -- logging: {"debug_logs", "audit_logs", "sensitive_retention_days"}
    logging_policy = models.JSONField(default=dict, blank=True)

    # -- path and calendar
    path = models.CharField(max_length=10, choices=Path.choices, default=Path.NORMAL)
    standard_template = models.ForeignKey(
        "releases.StandardChangeTemplate",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="releases",
    )
    emergency_reason = models.TextField(blank=True)
    planned_start = models.DateTimeField(null=True, blank=True)
    signoffs_due_at = models.DateTimeField(
        null=True,
        blank=True,
        editable=False,
        help_text=_("Emergency path: when the sign-offs skipped at rollout are due."),
    )

    # -- state
    state = models.CharField(max_length=12, choices=State.choices, default=State.DRAFT)
    filed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="releases_filed"
    )
    reopened_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="reopened_as"
    )
    submitted_at = models.DateTimeField(null=True, blank=True, editable=False)
    approved_at = models.DateTimeField(null=True, blank=True, editable=False)
    rollout_started_at = models.DateTimeField(null=True, blank=True, editable=False)
    closed_at = models.DateTimeField(
        null=True, blank=True, editable=False, help_text=_("Released, rejected, withdrawn, …")
    )
    close_code = models.CharField(
        max_length=24,
        choices=CloseCode.choices,
        blank=True,
        help_text=_("How a finished release ended; set when it finishes, correctable after."),
    )
    close_note = models.TextField(blank=True)
    incidents = models.JSONField(
        default=list, blank=True, help_text=_('Linked incidents: [{"ticket", "url"}].')
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ReleaseQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        permissions = [
            ("waive_gate", "Can waive a release's gate"),
            ("promote_release", "Can start, promote, hold or abort a rollout"),
            ("record_rollback", "Can record a rollback"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(
                    state__in=[
                        "draft",
                        "submitted",
                        "approved",
                        "rolling_out",
                        "released",
                        "rejected",
                        "withdrawn",
                        "aborted",
                        "rolled_back",
                    ]
                ),
                name="releases_release_state_valid",
            ),
            models.CheckConstraint(
                condition=Q(
                    change_kind__in=[
                        "model_upgrade",
                        "engine_upgrade",
                        "quantization_switch",
                        "launch_parameters",
                        "routing",
                        "capacity",
                        "decommission",
                    ]
                ),
                name="releases_release_change_kind_valid",
            ),
            models.CheckConstraint(
                condition=Q(path__in=["standard", "normal", "emergency"]),
                name="releases_release_path_valid",
            ),
            models.CheckConstraint(
                condition=Q(risk__in=["", "low", "medium", "high"]),
                name="releases_release_risk_valid",
            ),
            models.CheckConstraint(
                condition=Q(
                    close_code__in=[
                        "",
                        "successful",
                        "successful_with_issues",
                        "failed",
                        "rolled_back",
                    ]
                ),
                name="releases_release_close_code_valid",
            ),
            models.CheckConstraint(
                condition=Q(state__in=["draft", "withdrawn"]) | Q(submitted_at__isnull=False),
                name="releases_release_past_draft_was_submitted",
            ),
        ]
        indexes = [
            # The list, filtered by service and state, newest first (ties by id, the list's
            # order, so a page is read from the index without a sort); the service page.
            models.Index(
                fields=["service", "state", "-created_at", "-id"],
                name="releases_release_service_idx",
            ),
            # The unfiltered list, newest first: a page is the index's first rows, not a
            # sort of every release (22 ms at 20,000 releases without it).
            models.Index(fields=["-created_at", "-id"], name="releases_release_newest_idx"),
            # The lock rule: "is this revision referenced by a release past draft?"
            models.Index(fields=["to_revision", "state"], name="releases_release_to_rev_idx"),
            # Lists filtered by state alone (waiting for me, in flight).
            models.Index(fields=["state", "-created_at", "-id"], name="releases_release_state_idx"),
        ]

    def __str__(self) -> str:
        return f"release #{self.pk}"

    @property
    def is_draft(self) -> bool:
        return self.state == self.State.DRAFT

    @property
    def carries_all(self) -> bool:
        """Released: its revision carries all of the service's traffic."""
        return self.state == self.State.RELEASED

    def allowed(self, action: str) -> bool:
        """Whether `action` (`transitions.Action`) applies to the release's state."""
        return transitions.allowed(self.state, self.path, action)

    def refusal(self, action: str) -> str | None:
        """The sentence a verb refuses `action` with in this state, or None."""
        if self.allowed(action):
            return None
        transition = transitions.TRANSITIONS[transitions.Action(action)]
        words = " or ".join(self.State(s).label.lower() for s in transition.sources(self.path))
        return (
            f"Release #{self.pk} is {self.get_state_display().lower()}; "
            f"only a {words} release can be {transition.doing}."
        )
