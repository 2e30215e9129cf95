"""A service-day's cost as it was computed when its facts were recorded.

`releases.cost.services.record_cost` writes these rows from `releases.cost.queries.
cost_days` when a run summary is recorded (that day) or a price sheet is (the days it
prices); the pages, the reviews and the FOCUS export read them
(`releases.cost.queries.stored_cost_days`, `releases.cost.focus_copy`).

One row per part of a priced service-day, in the order of the day's split
(`position`): the tenants' parts, then the idle line. An unpriced service-day (no price
sheet in force for its GPU model) is one row with `priced` False and no part: the
pages and the export count it. What the export and the pages show is written into
every row (the revision, the price, the day's facts), so reading them joins nothing
but the service.
"""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _

from ledger.models import Revision, RunSummary, Service


class CostShare(models.Model):
    summary = models.ForeignKey(
        RunSummary,
        on_delete=models.CASCADE,
        related_name="cost_shares",
        help_text=_("The day's run summary the cost was computed from."),
    )
    # No index of its own: the unique constraint below leads with the service.
    service = models.ForeignKey(
        Service, on_delete=models.CASCADE, related_name="cost_shares", db_index=False
    )
    date = models.DateField()
    position = models.PositiveSmallIntegerField(
        help_text=_("The part's place in the day's split; the idle line is last.")
    )
    priced = models.BooleanField(
        help_text=_("False: no price sheet was in force; the day's only row, without a part.")
    )
    # The revision that served, as it was when the cost was computed.
    revision = models.ForeignKey(
        Revision, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    revision_label = models.CharField(max_length=20, blank=True)
    fingerprint = models.CharField(max_length=100, blank=True)
    release = models.CharField(max_length=40, blank=True)
    gpu_model = models.CharField(max_length=60, blank=True)
    gpus_per_replica = models.PositiveIntegerField(default=1)
    replicas = models.PositiveIntegerField(default=1)
    output_tokens_per_s = models.FloatField(null=True, blank=True)
    # The price sheet version in force that day.
    price_per_gpu_hour = models.DecimalField(max_digits=12, decimal_places=4, null=True)
    currency = models.CharField(max_length=3, blank=True)
    price_since = models.DateField(null=True, blank=True)
    # The day's split.
    allocation_key = models.CharField(max_length=20, blank=True)
    capacity_known = models.BooleanField(default=False)
    used_share = models.FloatField(default=0)
    day_gpu_hours = models.PositiveIntegerField(default=0)
    # The part.
    tenant = models.CharField(max_length=80, blank=True)
    task_type = models.CharField(max_length=40, blank=True)
    gpu_hours = models.DecimalField(max_digits=16, decimal_places=6, default=0)
    cost = models.DecimalField(max_digits=14, decimal_places=2, default=0)
    requests = models.BigIntegerField(default=0)
    input_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    accepted_answers = models.BigIntegerField(default=0)
    # The FOCUS cells that are text built from the above, as the Python writer builds
    # them (`releases.cost.focus`): the ChargeDescription (spreadsheet-safe) and Tags.
    description = models.TextField(blank=True)
    tags = models.TextField(blank=True)

    class Meta:
        constraints = [
            # Also the index every reader walks: a period's rows of some services, in
            # service, day and part order (stored_cost_days, the FOCUS COPY).
            models.UniqueConstraint(
                fields=["service", "date", "position"],
                name="releases_costshare_one_per_position",
            ),
        ]
        indexes = [
            # The fleet's pages and export: a period of every service.
            models.Index(fields=["date"], name="releases_costshare_date"),
        ]

    def __str__(self) -> str:
        return f"{self.service_id} {self.date} #{self.position} {self.tenant}"
