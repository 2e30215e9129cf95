"""What an hour of each kind of GPU costs, versioned by the day it takes effect.

A price sheet is one version: a GPU model (as runtimes name it, `Runtime.gpu_model`),
a price per GPU-hour in a currency, and the day from which it holds. The price of a
day is the version with the latest `effective_from` on or before it; a new version
never rewrites an old one, and each is an Event (`price_sheet.recorded`).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _


class PriceSheetQuerySet(models.QuerySet):
    def in_force(self, gpu_model: str, day) -> PriceSheet | None:
        return (
            self.filter(gpu_model=gpu_model, effective_from__lte=day)
            .order_by("-effective_from")
            .first()
        )


class PriceSheet(models.Model):
    gpu_model = models.CharField(
        _("GPU model"), max_length=60, help_text=_("As runtimes name it, e.g. H100-80GB.")
    )
    price_per_gpu_hour = models.DecimalField(
        _("price per GPU-hour"),
        max_digits=12,
        decimal_places=4,
        help_text=_("What one GPU of this model costs for an hour, e.g. 2.4500."),
    )
    currency = models.CharField(max_length=3, help_text=_("ISO 4217 code, e.g. USD, EUR, CNY."))
    effective_from = models.DateField(
        help_text=_("The first day (UTC) this price holds; it holds until the next version.")
    )
    note = models.CharField(max_length=300, blank=True, help_text=_("Where the price comes from."))
    recorded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    recorded_at = models.DateTimeField()

    objects = PriceSheetQuerySet.as_manager()

    class Meta:
        ordering = ["gpu_model", "-effective_from"]
        constraints = [
            models.UniqueConstraint(
                fields=["gpu_model", "effective_from"], name="ledger_pricesheet_one_per_day"
            ),
            models.CheckConstraint(
                condition=Q(price_per_gpu_hour__gte=0), name="ledger_pricesheet_price_not_negative"
            ),
            models.CheckConstraint(
                condition=Q(currency__regex=r"^[A-Z]{3}$"), name="ledger_pricesheet_currency_iso"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.gpu_model} {self.price_per_gpu_hour} {self.currency}/GPU-h from {self.effective_from}"
