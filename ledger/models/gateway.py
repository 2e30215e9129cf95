"""A service's gateway policy, one row per version."""

from __future__ import annotations

import pgtrigger
from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from ledger.models.registry import Service


class GatewayPolicy(models.Model):
    """One version of what the LLM gateway enforces for a service (limits, tenant quotas,
    fallbacks, degradation per task type, retries, egress). A change is a new version;
    a revision names the version it runs with.

    `document` is None for a version recorded by name only: the free-text policy
    names revisions carried before policies were versioned. Such a version is
    *unknown*, and the production gate refuses it.
    """

    service = models.ForeignKey(Service, on_delete=models.PROTECT, related_name="gateway_policies")
    version = models.PositiveIntegerField(help_text=_("Counts up per service: v1, v2, …"))
    label = models.CharField(
        max_length=40,
        help_text=_(
            "How revisions name this version: v1, v2, … or the name it had before "
            "policies were versioned (gw-2026.03)."
        ),
    )
    document = models.JSONField(
        null=True,
        blank=True,
        help_text=_("The policy (ledger/schemas/gateway_policy.schema.json); empty if unknown."),
    )
    sha256 = models.CharField(max_length=71, help_text=_("Of the document's canonical JSON."))
    note = models.TextField(blank=True, help_text=_("Why this version: what changed and for whom."))
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["service", "-version"]
        verbose_name_plural = "gateway policies"
        constraints = [
            models.UniqueConstraint(
                fields=["service", "version"], name="ledger_gatewaypolicy_version_unique"
            ),
            models.UniqueConstraint(
                fields=["service", "label"], name="ledger_gatewaypolicy_label_unique"
            ),
            models.CheckConstraint(
                condition=Q(version__gte=1), name="ledger_gatewaypolicy_version_positive"
            ),
        ]
        triggers = [
            # A version is what revisions were approved with: never rewritten.
            pgtrigger.Protect(
                name="ledger_gatewaypolicy_is_immutable",
                operation=pgtrigger.Update,
                condition=pgtrigger.Condition(
                    "OLD.service_id IS DISTINCT FROM NEW.service_id"
                    " OR OLD.version IS DISTINCT FROM NEW.version"
                    " OR OLD.label IS DISTINCT FROM NEW.label"
                    " OR OLD.document IS DISTINCT FROM NEW.document"
                    " OR OLD.sha256 IS DISTINCT FROM NEW.sha256"
                ),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.service.slug} {self.label}"

    @property
    def known(self) -> bool:
        return self.document is not None
