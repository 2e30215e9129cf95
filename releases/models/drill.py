"""Peak drills: a business peak rehearsed against the services that will carry it.

A drill is planned (its task mix, arrival profile, per-task-type bounds and capacity
plan, checked by `releases.drills.services.plan`), run by the workers as open-loop
arrivals (`results`), then concluded by the people it names (`conclusion`). Each step
is an Event.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from lib.choices import ChoiceLabels


class Drill(ChoiceLabels, models.Model):
    class State(models.TextChoices):
        PLANNED = "planned", _("Planned")
        RAN = "ran", _("Ran")
        CONCLUDED = "concluded", _("Concluded")

    name = models.CharField(max_length=160)
    business_event = models.CharField(
        max_length=200,
        blank=True,
        help_text=_("The peak rehearsed, e.g. month-end close or a support campaign."),
    )
    window_starts_at = models.DateTimeField(
        null=True, blank=True, help_text=_("When the peak itself begins.")
    )
    window_ends_at = models.DateTimeField(null=True, blank=True)
    services = models.ManyToManyField("ledger.Service", related_name="drills")
    revision = models.ForeignKey(
        "ledger.Revision",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="drills",
        help_text=_("The revision under test; empty: what is live when the drill runs."),
    )
    # [{"task_type", "sample_set": id, "weight"}], checked by the plan's service.
    mix = models.JSONField(default=list)
    # {"type": constant | poisson | ramp, "rate", "duration_s", "stages": [{duration_s, rate}]}
    arrival = models.JSONField(default=dict)
    # {task_type: {"ttft_p95_ms", "e2e_p95_ms", "failure_message", "degrade_to"}}
    bounds = models.JSONField(default=dict)
    # {"extra_replicas", "pool", "prewarm_pools": [], "owner", "reclaim_by"}
    capacity = models.JSONField(default=dict, blank=True)
    seed = models.BigIntegerField(help_text=_("Draws the same arrivals and samples again."))
    in_flight_ceiling = models.PositiveIntegerField(
        default=256,
        help_text=_("At most this many requests in flight; a start above it is dropped."),
    )
    signers = models.JSONField(
        default=list, help_text=_("The roles whose sign-off concludes the drill.")
    )
    state = models.CharField(max_length=12, choices=State.choices, default=State.PLANNED)
    results = models.JSONField(null=True, blank=True)
    ran_at = models.DateTimeField(null=True, blank=True)
    conclusion = models.JSONField(null=True, blank=True)
    concluded_at = models.DateTimeField(null=True, blank=True)
    concluded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.CheckConstraint(
                condition=Q(state__in=["planned", "ran", "concluded"]),
                name="releases_drill_state_valid",
            ),
            models.CheckConstraint(
                condition=Q(window_ends_at__isnull=True)
                | Q(window_starts_at__isnull=True)
                | Q(window_ends_at__gt=models.F("window_starts_at")),
                name="releases_drill_window_ordered",
            ),
        ]

    def __str__(self) -> str:
        return f"drill #{self.pk} {self.name}"
