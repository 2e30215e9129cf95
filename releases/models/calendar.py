"""Change paths and the calendar: pre-approved standard changes and blackout windows."""

from __future__ import annotations

import calendar as _calendar
import datetime as dt

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from lib.choices import ChoiceLabels


class StandardChangeTemplateQuerySet(models.QuerySet):
    def usable(self) -> StandardChangeTemplateQuerySet:
        return self.filter(retired_at__isnull=True)


class StandardChangeTemplate(models.Model):
    """A pre-approved low-risk change kind for a tier (versioned; a platform user retires one).

    A release on the standard path names one; it then needs only the model
    team's sign-off. A change makes a new version; releases keep the version
    they were filed under.
    """

    key = models.SlugField(max_length=64, help_text=_("e.g. internal-launch-parameters"))
    version = models.PositiveIntegerField()
    title = models.CharField(max_length=160)
    description = models.TextField(blank=True)
    tier = models.CharField(max_length=16, help_text=_("The service tier it applies to."))
    change_kind = models.CharField(max_length=20)
    max_risk = models.CharField(max_length=8, default="low")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    retired_at = models.DateTimeField(null=True, blank=True)
    retired_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    objects = StandardChangeTemplateQuerySet.as_manager()

    class Meta:
        ordering = ["key", "-version"]
        constraints = [
            models.UniqueConstraint(
                fields=["key", "version"], name="releases_standardchangetemplate_version_unique"
            ),
            models.CheckConstraint(
                condition=Q(version__gte=1), name="releases_standardchangetemplate_version_positive"
            ),
            models.CheckConstraint(
                condition=Q(tier__in=["experimental", "internal", "production"]),
                name="releases_standardchangetemplate_tier_valid",
            ),
            models.CheckConstraint(
                condition=Q(max_risk__in=["low", "medium", "high"]),
                name="releases_standardchangetemplate_risk_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.key} v{self.version}"


class BlackoutWindow(ChoiceLabels, models.Model):
    """No rollout may start inside one, except on the emergency path.

    `starts_at` to `ends_at` is the first occurrence; `recurrence` repeats that
    span every week, month (same day of the month, clipped to the month's
    last day) or year. No service: it applies to every service.
    """

    class Recurrence(models.TextChoices):
        NONE = "none", _("One-off")
        WEEKLY = "weekly", _("Every week")
        MONTHLY = "monthly", _("Every month")
        YEARLY = "yearly", _("Every year")

    name = models.CharField(max_length=120, help_text=_("e.g. Month-end close"))
    service = models.ForeignKey(
        "ledger.Service",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="blackout_windows",
        help_text=_("Empty: every service."),
    )
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField()
    recurrence = models.CharField(max_length=8, choices=Recurrence.choices, default=Recurrence.NONE)
    reason = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["starts_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(ends_at__gt=models.F("starts_at")),
                name="releases_blackoutwindow_ends_after_start",
                violation_error_message="Ends at must be after Starts at.",
            ),
            models.CheckConstraint(
                condition=Q(recurrence__in=["none", "weekly", "monthly", "yearly"]),
                name="releases_blackoutwindow_recurrence_valid",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def occurrence_containing(self, moment: dt.datetime) -> tuple[dt.datetime, dt.datetime] | None:
        """The (start, end) of the occurrence that contains `moment`, or None."""
        span = self.ends_at - self.starts_at
        if moment < self.starts_at:
            return None
        if self.recurrence == self.Recurrence.NONE:
            return (self.starts_at, self.ends_at) if moment < self.ends_at else None
        if self.recurrence == self.Recurrence.WEEKLY:
            weeks = (moment - self.starts_at) // dt.timedelta(weeks=1)
            candidates = [self.starts_at + dt.timedelta(weeks=weeks - k) for k in (0, 1)]
        else:
            step = 12 if self.recurrence == self.Recurrence.YEARLY else 1
            months = (moment.year - self.starts_at.year) * 12 + moment.month - self.starts_at.month
            months -= months % step
            candidates = [_add_months(self.starts_at, months - k * step) for k in (0, 1)]
        for start in candidates:
            if start >= self.starts_at and start <= moment < start + span:
                return start, start + span
        return None


def _add_months(moment: dt.datetime, months: int) -> dt.datetime:
    index = moment.month - 1 + months
    year, month = moment.year + index // 12, index % 12 + 1
    day = min(moment.day, _calendar.monthrange(year, month)[1])
    return moment.replace(year=year, month=month, day=day)
