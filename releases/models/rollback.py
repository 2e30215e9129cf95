"""What an SRE did and what the system noticed: rollbacks executed, unauthorized changes
found, and a service's own playbooks and degradation policies."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from lib.choices import ChoiceLabels


class RollbackEvent(ChoiceLabels, models.Model):
    """One rollback actually executed: the live revision set back to a target.

    It starts when it is recorded and finishes when the target's verification replay
    passes (or fails), or when the SRE confirms it by hand where nothing can verify
    it; its duration is compared with the minutes the plan expected.
    """

    class State(models.TextChoices):
        VERIFYING = "verifying", _("Verifying")
        AWAITING_CONFIRMATION = "awaiting_confirmation", _("Awaiting confirmation")
        SUCCEEDED = "succeeded", _("Succeeded")
        FAILED = "failed", _("Failed")

    class CacheAnswer(models.TextChoices):
        """Was a cache emptied after the rollback? Blank until someone says."""

        UNANSWERED = "", _("Not answered yet")
        FLUSHED = "flushed", _("Flushed")
        NOT_FLUSHED = "not_flushed", _("Not flushed")
        NOT_IN_USE = "not_in_use", _("Not in use")

    FINISHED_STATES = ("succeeded", "failed")

    service = models.ForeignKey(
        "ledger.Service", on_delete=models.PROTECT, related_name="rollbacks"
    )
    release = models.ForeignKey(
        "releases.Release",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="rollbacks",
        help_text=_("The release rolled back, when there was one."),
    )
    from_revision = models.ForeignKey(
        "ledger.Revision",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text=_("What was live when the rollback started."),
    )
    to_revision = models.ForeignKey(
        "ledger.Revision", on_delete=models.PROTECT, related_name="+", help_text=_("The target.")
    )
    kind = models.CharField(
        max_length=16, blank=True, help_text=_("engine, model or gateway_policy")
    )
    reason = models.TextField()
    symptom = models.CharField(max_length=40, blank=True, help_text=_("The failure mode seen."))
    recorded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    expected_minutes = models.PositiveIntegerField(null=True, blank=True)
    state = models.CharField(max_length=24, choices=State.choices)
    verification_run = models.ForeignKey(
        "replay.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    outcome_note = models.TextField(blank=True)
    # Cached prefixes and answers of the revision rolled back may outlive it: readiness
    # stays at risk until both are answered (`releases.governance.queries.readiness`).
    prefix_cache = models.CharField(
        max_length=16,
        blank=True,
        default="",
        choices=CacheAnswer.choices,
        help_text=_("Was the engine's prefix (KV) cache flushed after the rollback?"),
    )
    response_cache = models.CharField(
        max_length=16,
        blank=True,
        default="",
        choices=CacheAnswer.choices,
        help_text=_("Was the gateway's response cache flushed after the rollback?"),
    )

    class Meta:
        ordering = ["-started_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=~Q(reason=""), name="releases_rollbackevent_has_reason"
            ),
            models.CheckConstraint(
                condition=Q(
                    state__in=["verifying", "awaiting_confirmation", "succeeded", "failed"]
                ),
                name="releases_rollbackevent_state_valid",
            ),
            models.CheckConstraint(
                condition=Q(finished_at__isnull=True) | Q(finished_at__gte=models.F("started_at")),
                name="releases_rollbackevent_finishes_after_start",
            ),
            models.CheckConstraint(
                condition=Q(state__in=["succeeded", "failed"], finished_at__isnull=False)
                | Q(state__in=["verifying", "awaiting_confirmation"], finished_at__isnull=True),
                name="releases_rollbackevent_finished_has_time",
            ),
            models.CheckConstraint(
                condition=Q(prefix_cache__in=["", "flushed", "not_flushed", "not_in_use"]),
                name="releases_rollbackevent_prefix_cache_valid",
            ),
            models.CheckConstraint(
                condition=Q(response_cache__in=["", "flushed", "not_flushed", "not_in_use"]),
                name="releases_rollbackevent_response_cache_valid",
            ),
        ]
        indexes = [
            # The service page and the incident screen: a service's latest rollbacks.
            models.Index(fields=["service", "-started_at"], name="releases_rollback_service_idx"),
        ]

    def __str__(self) -> str:
        return f"rollback #{self.pk} of {self.service_id}"

    @property
    def duration(self):
        return self.finished_at - self.started_at if self.finished_at else None


class UnauthorizedChange(ChoiceLabels, models.Model):
    """Something serves a live service otherwise than the ledger says.

    Of kind *engine*, a probe found a backend of the live revision serving something
    else (`backend` and `probe` say which); of kind *gateway*, the running LLM gateway
    routes the service otherwise than the config the ledger renders
    (`releases.gateway.services.checks`: deployments, weights, limits), one open finding per
    service at a time. It stays on the service page and the incident screen until
    someone reconciles it: a release that registers what is running, a rollback, or a
    note saying how it was put back.
    """

    class Kind(models.TextChoices):
        ENGINE = "engine", _("Engine")
        GATEWAY = "gateway", _("Gateway")

    service = models.ForeignKey(
        "ledger.Service", on_delete=models.CASCADE, related_name="unauthorized_changes"
    )
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.ENGINE)
    backend = models.ForeignKey(
        "replay.Backend", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    probe = models.OneToOneField(
        "replay.Probe", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    expected_revision = models.ForeignKey(
        "ledger.Revision", on_delete=models.PROTECT, related_name="+"
    )
    found = models.JSONField(help_text=_("Each disagreement: what, registered, reported."))
    detected_at = models.DateTimeField()
    reconciled_at = models.DateTimeField(null=True, blank=True)
    reconciled_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    reconciliation = models.TextField(blank=True, help_text=_("How it was reconciled."))

    class Meta:
        ordering = ["-detected_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(reconciled_at__isnull=True) | ~Q(reconciliation=""),
                name="releases_unauthorizedchange_reconciled_says_how",
            ),
            models.CheckConstraint(
                condition=Q(kind__in=["engine", "gateway"]),
                name="releases_unauthorizedchange_kind_valid",
            ),
            # The gateway check opens one finding per service and adds to nothing while
            # it is open: two checks at once cannot open two.
            models.UniqueConstraint(
                fields=["service"],
                condition=Q(kind="gateway", reconciled_at__isnull=True),
                name="releases_unauthorizedchange_one_open_gateway",
            ),
        ]
        indexes = [
            # The service page and the incident screen: a service's open findings.
            models.Index(
                fields=["service"],
                condition=Q(reconciled_at__isnull=True),
                name="releases_unauth_open_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"unauthorized change on {self.service_id} at {self.detected_at:%Y-%m-%d %H:%M}"


class Runbook(models.Model):
    """A service's own playbooks and degradation policies, over the tier's defaults.

    One row per service, read with the service in the same query wherever it is shown.
    `playbooks`: failure mode → {"diagnosis": [steps], "recovery": [actions]};
    `degradation`: task type → {"may_degrade": bool, "how": text}. What is absent
    falls back to `releases.governance.playbooks`.
    """

    service = models.OneToOneField(
        "ledger.Service", on_delete=models.CASCADE, related_name="runbook"
    )
    playbooks = models.JSONField(default=dict, blank=True)
    degradation = models.JSONField(default=dict, blank=True)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    updated_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"runbook of {self.service_id}"


class ReadinessRecord(models.Model):
    """The latest rollback-readiness verdict of a service, for lists that filter on it.

    The incident screen and the service page compute the verdict live; the catalog
    reads this row, refreshed after every rollout, rollback and verification, and by
    a periodic sweep, and says how old it is.
    """

    service = models.OneToOneField(
        "ledger.Service", on_delete=models.CASCADE, related_name="readiness_record"
    )
    verdict = models.CharField(max_length=10)
    reasons = models.JSONField(default=list)
    target = models.ForeignKey(
        "ledger.Revision", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    computed_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(verdict__in=["ready", "at risk", "not ready"]),
                name="releases_readinessrecord_verdict_valid",
            ),
        ]
        indexes = [
            # The catalog's readiness filter.
            models.Index(fields=["verdict"], name="releases_readiness_verdict_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.verdict} ({self.service_id})"
