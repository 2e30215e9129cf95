"""Periodic and triggered reviews of a service: why each was raised, its checklist, its
conclusion and the actions it left.

A review is raised by the daily sweep (`releases.reviews.services.periodic_reviews.sweep_reviews`)
when a service's cadence is due or something drifted; one at a time per service (a new
trigger on an open review is added to it). Its checklist is pre-filled with what the
system found, answered by the reviewer, and the conclusion freezes the lot: the database
itself refuses a change of a concluded review, of its checklist or of a finished action
(the triggers below), whoever writes around the verbs.
"""

from __future__ import annotations

import pgtrigger
from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _
from django.utils.translation import gettext_noop

from lib.choices import ChoiceLabels


class ReviewQuerySet(models.QuerySet):
    def not_concluded(self) -> ReviewQuerySet:
        return self.exclude(state=Review.State.CONCLUDED)

    def for_page(self) -> ReviewQuerySet:
        return self.select_related("service__team", "assignee", "concluded_by")


class Review(ChoiceLabels, models.Model):
    class State(models.TextChoices):
        OPEN = "open", _("Open")
        IN_PROGRESS = "in_progress", _("In progress")
        OVERDUE = "overdue", _("Overdue")
        CONCLUDED = "concluded", _("Concluded")

    class Outcome(models.TextChoices):
        PASS = "pass", _("Pass")
        PASS_WITH_ACTIONS = "pass_with_actions", _("Pass with actions")
        FAIL = "fail", _("Fail")

    # Not concluded: what "open review" means on every page and in the one-per-service rule.
    OPEN_STATES = (State.OPEN, State.IN_PROGRESS, State.OVERDUE)

    service = models.ForeignKey("ledger.Service", on_delete=models.PROTECT, related_name="reviews")
    state = models.CharField(max_length=12, choices=State.choices, default=State.OPEN)
    raised_at = models.DateTimeField()
    due_on = models.DateField(help_text=_("Concluded by this day, or overdue the day after."))
    assignee = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text=_("Who conducts it: the service's platform owner by default."),
    )
    started_at = models.DateTimeField(null=True, blank=True)
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    overdue_since = models.DateTimeField(null=True, blank=True)
    concluded_at = models.DateTimeField(null=True, blank=True)
    concluded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    outcome = models.CharField(max_length=20, choices=Outcome.choices, blank=True)
    conclusion = models.TextField(blank=True, help_text=_("The reviewer's summary."))
    next_due_on = models.DateField(
        null=True, blank=True, help_text=_("When the next periodic review of the service is due.")
    )

    objects = ReviewQuerySet.as_manager()

    class Meta:
        ordering = ["due_on", "pk"]
        constraints = [
            models.CheckConstraint(
                condition=Q(state__in=["open", "in_progress", "overdue", "concluded"]),
                name="releases_review_state_valid",
            ),
            models.CheckConstraint(
                condition=Q(outcome__in=["", "pass", "pass_with_actions", "fail"]),
                name="releases_review_outcome_valid",
            ),
            # One review at a time per service: a second trigger joins the open one.
            models.UniqueConstraint(
                fields=["service"],
                condition=~Q(state="concluded"),
                name="releases_review_one_open_per_service",
            ),
            models.CheckConstraint(
                condition=(
                    ~Q(state="concluded")
                    & Q(concluded_at__isnull=True, outcome="", next_due_on__isnull=True)
                )
                | (
                    Q(state="concluded", concluded_at__isnull=False, next_due_on__isnull=False)
                    & ~Q(outcome="")
                ),
                name="releases_review_concluded_has_outcome",
            ),
            models.CheckConstraint(
                condition=~Q(state="overdue") | Q(overdue_since__isnull=False),
                name="releases_review_overdue_has_time",
            ),
        ]
        indexes = [
            # "My reviews" and home: a person's open reviews, due soonest first.
            models.Index(
                fields=["assignee", "due_on"],
                condition=~Q(state="concluded"),
                name="releases_review_mine_idx",
            ),
            # The sweep's overdue marking and the list's state filter.
            models.Index(fields=["state", "due_on"], name="releases_review_state_idx"),
            # The sweep's "last concluded review" of each service.
            models.Index(
                fields=["service", "-concluded_at"],
                condition=Q(state="concluded"),
                name="releases_review_concluded_idx",
            ),
        ]
        triggers = [
            # Concluding is final: the conclusion and its checklist are in the ledger.
            pgtrigger.Protect(
                name="releases_review_concluded_is_final",
                operation=pgtrigger.Update | pgtrigger.Delete,
                condition=pgtrigger.Condition("OLD.state = 'concluded'"),
            ),
        ]

    def __str__(self) -> str:
        return f"review #{self.pk} of {self.service_id}"

    @property
    def is_open(self) -> bool:
        return self.state != Review.State.CONCLUDED


class ReviewTrigger(ChoiceLabels, models.Model):
    """Why a review was raised: one finding of the sweep, with its numbers.

    `key` names the occurrence (the revision that drifted, the run that regressed, the
    event that changed a license): the same occurrence is not raised twice, and a
    conclusion acknowledges it until the service's next due date.
    """

    class Kind(models.TextChoices):
        CADENCE = "cadence", _("Cadence due")
        LATENCY_DRIFT = "latency_drift", _("Latency drift")
        ERROR_RATE_DRIFT = "error_rate_drift", _("Error-rate drift")
        LICENSE = "license", _("License changed or approval revoked")
        ROLLBACK_VERIFICATION = "rollback_verification", _("Rollback target verification")
        EVIDENCE_EXPIRED = "evidence_expired", _("Live evidence expired")
        REPLAY_REGRESSION = "replay_regression", _("Replay regression")
        ASSET_DEPRECATED = "asset_deprecated", _("Live asset deprecated")
        ENGINE_OUTDATED = "engine_outdated", _("Engine version behind")
        COST_DRIFT = "cost_drift", _("Cost drift")
        QUOTA_PRESSURE = "quota_pressure", _("Quota pressure")

    review = models.ForeignKey(Review, on_delete=models.CASCADE, related_name="triggers")
    kind = models.CharField(max_length=24, choices=Kind.choices)
    key = models.CharField(max_length=200)
    summary = models.TextField(help_text=_("The finding in one sentence, with its numbers."))
    numbers = models.JSONField(default=dict, help_text=_("What was measured and compared."))
    detected_at = models.DateTimeField()

    class Meta:
        ordering = ["review", "detected_at", "pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["review", "kind", "key"], name="releases_reviewtrigger_once"
            ),
            models.CheckConstraint(
                condition=Q(
                    kind__in=[
                        "cadence",
                        "latency_drift",
                        "error_rate_drift",
                        "license",
                        "rollback_verification",
                        "evidence_expired",
                        "replay_regression",
                        "asset_deprecated",
                        "engine_outdated",
                        "cost_drift",
                        "quota_pressure",
                    ]
                ),
                name="releases_reviewtrigger_kind_valid",
            ),
        ]
        indexes = [
            # The review list's trigger filter.
            models.Index(fields=["kind", "review"], name="releases_reviewtrig_kind_idx"),
        ]
        triggers = [
            pgtrigger.Protect(name="releases_reviewtrigger_is_final", operation=pgtrigger.Update),
        ]

    def __str__(self) -> str:
        return f"{self.kind} on review #{self.review_id}"


class ReviewChecklistItem(ChoiceLabels, models.Model):
    """One question of a review's checklist: the facts the system found, then the
    reviewer's answer and note."""

    # English wherever it is written (the review.concluded event's checklist titles, the
    # API): gettext_noop only puts it in the catalog; pages translate it when they show it.
    class Key(models.TextChoices):
        VERSIONS = "versions", gettext_noop("Model and engine versions still maintained")
        LICENSE = "license", gettext_noop("License and weights source still acceptable")
        SAMPLE_SETS = (
            "sample_sets",
            gettext_noop("Evaluation sample sets cover the task types served"),
        )
        COST_LATENCY = (
            "cost_latency",
            gettext_noop("Cost and latency against the baseline at release"),
        )
        ROLLBACK_TARGET = "rollback_target", gettext_noop("Rollback target still bootable")
        CAPABILITIES = "capabilities", gettext_noop("Capability claims still verified")
        EVIDENCE = "evidence", gettext_noop("Evidence still current")
        # Only on a review of a service with a tenant under quota pressure: FinOps and the
        # business owner reconfirm the quota (or change it through a policy version).
        QUOTA_RECONFIRMATION = (
            "quota_reconfirmation",
            gettext_noop("FinOps and the business owner reconfirm the tenants' quotas"),
        )

    class Answer(models.TextChoices):
        OK = "ok", _("OK")
        ACTION_NEEDED = "action_needed", _("Action needed")
        NOT_APPLICABLE = "not_applicable", _("Not applicable")

    class Suggestion(models.TextChoices):
        CLEAR = "clear", _("Nothing found")
        ATTENTION = "attention", _("Look at this")

    review = models.ForeignKey(Review, on_delete=models.CASCADE, related_name="items")
    key = models.CharField(max_length=20, choices=Key.choices)
    position = models.PositiveSmallIntegerField()
    facts = models.JSONField(
        default=list, help_text=_('What the system found: [{"label", "value", "url"}].')
    )
    flags = models.JSONField(default=list, help_text=_("What the system thinks needs a look."))
    suggestion = models.CharField(max_length=10, choices=Suggestion.choices)
    answer = models.CharField(max_length=16, choices=Answer.choices, blank=True)
    note = models.TextField(blank=True)
    answered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    answered_at = models.DateTimeField(null=True, blank=True)
    frozen = models.BooleanField(default=False, help_text=_("Its review is concluded."))

    class Meta:
        ordering = ["review", "position"]
        constraints = [
            models.UniqueConstraint(fields=["review", "key"], name="releases_reviewitem_once"),
            models.CheckConstraint(
                condition=Q(answer__in=["", "ok", "action_needed", "not_applicable"]),
                name="releases_reviewitem_answer_valid",
            ),
            models.CheckConstraint(
                condition=Q(answer="", answered_at__isnull=True)
                | (~Q(answer="") & Q(answered_at__isnull=False)),
                name="releases_reviewitem_answer_has_time",
            ),
            # "Action needed" and "not applicable" say why.
            models.CheckConstraint(
                condition=Q(answer__in=["", "ok"]) | ~Q(note=""),
                name="releases_reviewitem_answer_has_note",
            ),
        ]
        triggers = [
            pgtrigger.Protect(
                name="releases_reviewitem_frozen",
                operation=pgtrigger.Update | pgtrigger.Delete,
                condition=pgtrigger.Condition("OLD.frozen"),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.key} of review #{self.review_id}"


class ReviewAction(models.Model):
    """Something a conclusion asked for: who does it, by when. Shown on the service page
    until it is done."""

    review = models.ForeignKey(Review, on_delete=models.PROTECT, related_name="actions")
    service = models.ForeignKey(
        "ledger.Service", on_delete=models.PROTECT, related_name="review_actions"
    )
    description = models.TextField()
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    due_on = models.DateField()
    created_at = models.DateTimeField()
    done_at = models.DateTimeField(null=True, blank=True)
    done_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    done_note = models.TextField(blank=True)

    class Meta:
        ordering = ["due_on", "pk"]
        constraints = [
            models.CheckConstraint(
                condition=~Q(description=""), name="releases_reviewaction_has_description"
            ),
            models.CheckConstraint(
                condition=Q(done_at__isnull=True, done_by__isnull=True)
                | Q(done_at__isnull=False, done_by__isnull=False),
                name="releases_reviewaction_done_by_someone",
            ),
        ]
        indexes = [
            # The service page: a service's actions not done yet.
            models.Index(
                fields=["service", "due_on"],
                condition=Q(done_at__isnull=True),
                name="releases_reviewaction_open_idx",
            ),
        ]
        triggers = [
            # What the conclusion asked stays as it asked it; done is final.
            pgtrigger.Protect(
                name="releases_reviewaction_as_concluded",
                operation=pgtrigger.Update,
                condition=pgtrigger.Condition(
                    "OLD.done_at IS NOT NULL OR "
                    + " OR ".join(
                        f"OLD.{column} IS DISTINCT FROM NEW.{column}"
                        for column in (
                            "review_id",
                            "service_id",
                            "description",
                            "owner_id",
                            "due_on",
                            "created_at",
                        )
                    )
                ),
            ),
            pgtrigger.Protect(name="releases_reviewaction_kept", operation=pgtrigger.Delete),
        ]

    def __str__(self) -> str:
        return f"action #{self.pk} of review #{self.review_id}"
