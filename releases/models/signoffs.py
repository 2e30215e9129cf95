"""What reviewers add to a release: sign-offs bound to a snapshot, waivers, comments."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _
from django.utils.translation import gettext_noop

from lib.choices import ChoiceLabels


class SignOff(ChoiceLabels, models.Model):
    """One signer's decision for one role, bound to the snapshot they saw.

    A later change of anything in the snapshot voids it (`voided_at` and a
    reason naming what changed); the row stays, so the release page shows what
    was approved, and a new sign-off is asked for.
    """

    # English wherever it is written (gate reasons and so the snapshot hash, emails, the
    # API): gettext_noop only puts it in the catalog; pages translate it when they show it.
    class Role(models.TextChoices):
        MODEL_TEAM = "model_team", gettext_noop("Model team")
        PLATFORM = "platform", gettext_noop("Platform")
        SECURITY_COMPLIANCE = "security_compliance", gettext_noop("Security & compliance")
        BUSINESS_OWNER = "business_owner", gettext_noop("Business owner")

    class Decision(models.TextChoices):
        APPROVE = "approve", _("Approve")
        REJECT = "reject", _("Reject")

    release = models.ForeignKey(
        "releases.Release", on_delete=models.CASCADE, related_name="signoffs"
    )
    role = models.CharField(max_length=20, choices=Role.choices)
    signer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    decision = models.CharField(max_length=8, choices=Decision.choices)
    comment = models.TextField(blank=True)
    snapshot_hash = models.CharField(max_length=64)
    snapshot = models.JSONField(help_text=_("The canonical snapshot the hash was computed from."))
    signed_at = models.DateTimeField()
    voided_at = models.DateTimeField(null=True, blank=True)
    void_reason = models.TextField(blank=True)
    as_administrator = models.BooleanField(
        default=False,
        help_text=_(
            "Signed by a superuser who does not hold the ledger role the sign-off needs: "
            "the authority came from being an administrator, not from the role."
        ),
    )

    class Meta:
        ordering = ["release", "role", "-signed_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(
                    role__in=["model_team", "platform", "security_compliance", "business_owner"]
                ),
                name="releases_signoff_role_valid",
            ),
            models.CheckConstraint(
                condition=Q(decision__in=["approve", "reject"]),
                name="releases_signoff_decision_valid",
            ),
            # One standing decision per role, and one role per person, on a release.
            models.UniqueConstraint(
                fields=["release", "role"],
                condition=Q(voided_at__isnull=True),
                name="releases_signoff_one_per_role",
            ),
            models.UniqueConstraint(
                fields=["release", "signer"],
                condition=Q(voided_at__isnull=True),
                name="releases_signoff_one_role_per_signer",
            ),
            models.CheckConstraint(
                condition=Q(voided_at__isnull=True) | ~Q(void_reason=""),
                name="releases_signoff_void_has_reason",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.role} {self.decision} by {self.signer_id} on release {self.release_id}"


class Waiver(models.Model):
    """A gate set aside for a release: by whom, why, until when. Shown wherever the release is."""

    release = models.ForeignKey(
        "releases.Release", on_delete=models.CASCADE, related_name="waivers"
    )
    gate = models.CharField(max_length=40, help_text=_("The gate key, e.g. load_evidence."))
    reason = models.TextField()
    expires_at = models.DateTimeField()
    granted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    granted_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    class Meta:
        ordering = ["release", "gate", "-granted_at"]
        constraints = [
            models.CheckConstraint(condition=~Q(reason=""), name="releases_waiver_has_reason"),
            models.CheckConstraint(
                condition=Q(expires_at__gt=models.F("granted_at")),
                name="releases_waiver_expires_after_grant",
            ),
            models.UniqueConstraint(
                fields=["release", "gate"],
                condition=Q(revoked_at__isnull=True),
                name="releases_waiver_one_per_gate",
            ),
        ]

    def __str__(self) -> str:
        return f"waiver of {self.gate} on release {self.release_id}"


class Comment(models.Model):
    release = models.ForeignKey(
        "releases.Release", on_delete=models.CASCADE, related_name="comments"
    )
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    body = models.TextField()
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["release", "created_at", "id"]
        constraints = [
            models.CheckConstraint(condition=~Q(body=""), name="releases_comment_not_empty"),
        ]

    def __str__(self) -> str:
        return f"comment {self.pk} on release {self.release_id}"
