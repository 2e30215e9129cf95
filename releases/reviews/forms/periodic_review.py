"""The forms of periodic reviews: the list's filters, the checklist, the conclusion with
its actions, an action marked done, and a review given to someone else."""

from __future__ import annotations

import datetime as dt
from typing import Any

import django_filters
from django import forms
from django.db.models import QuerySet
from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from ledger.models import Service
from lib.forms import LiveFilterSet
from releases.models import Review, ReviewChecklistItem, ReviewTrigger

NOTE_MAX_CHARS = 5000
ACTION_ROWS = 3


class ReviewListFilter(LiveFilterSet):
    state = django_filters.ChoiceFilter(
        choices=Review.State.choices, label=_("State"), empty_label=_("Any state")
    )
    service = django_filters.CharFilter(
        field_name="service__slug",
        label=_("Service"),
        help_text=_("A service slug, e.g. kb-assistant."),
    )
    tier = django_filters.ChoiceFilter(
        field_name="service__tier",
        choices=Service.Tier.choices,
        label=_("Service tier"),
        empty_label=_("Any tier"),
    )
    trigger = django_filters.ChoiceFilter(
        choices=ReviewTrigger.Kind.choices,
        empty_label=_("Any trigger"),
        label=_("Raised for"),
        method="by_trigger",
    )
    assignee = django_filters.CharFilter(
        field_name="assignee__username", label=_("Assignee"), help_text=_("A username.")
    )
    date_from = django_filters.DateFilter(
        field_name="raised_at",
        lookup_expr="date__gte",
        label=_("Raised from"),
        widget=forms.DateInput(attrs={"type": "date"}),
        help_text=_("Raised on or after this day."),
    )
    date_to = django_filters.DateFilter(
        field_name="raised_at",
        lookup_expr="date__lte",
        label=_("Raised to"),
        widget=forms.DateInput(attrs={"type": "date"}),
        help_text=_("Raised on or before this day."),
    )

    class Meta:
        model = Review
        fields: list[str] = []

    def by_trigger(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(pk__in=ReviewTrigger.objects.filter(kind=value).values("review_id"))

    def filter_queryset(self, queryset: QuerySet) -> QuerySet:
        start, end = self.form.cleaned_data.get("date_from"), self.form.cleaned_data.get("date_to")
        if start and end and start > end:
            self.form.add_error("date_to", gettext("The period ends before it starts."))
        return super().filter_queryset(queryset)


def answer_field(key: str) -> str:
    return f"{key}-answer"


def note_field(key: str) -> str:
    return f"{key}-note"


class ChecklistForm(forms.Form):
    """One answer and one note per checklist item, kept after an error."""

    def __init__(self, *args: Any, items: list[ReviewChecklistItem], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.items = items
        for item in items:
            self.fields[answer_field(item.key)] = forms.ChoiceField(
                choices=ReviewChecklistItem.Answer.choices,
                widget=forms.RadioSelect,
                required=False,
                # The title stays English in the ledger (gettext_noop); shown, it is translated.
                label=_(item.get_key_display()),
                initial=item.answer or None,
                help_text=_("OK, action needed, or not applicable to this service."),
            )
            self.fields[note_field(item.key)] = forms.CharField(
                widget=forms.Textarea(attrs={"rows": 2}),
                required=False,
                max_length=NOTE_MAX_CHARS,
                label=_("Note"),
                initial=item.note,
                help_text=_("Required unless OK: what you found, what must be done."),
            )

    def answers(self) -> list[dict[str, str]]:
        """The items given an answer, as the verb takes them."""
        return [
            {
                "key": item.key,
                "answer": self.cleaned_data[answer_field(item.key)],
                "note": self.cleaned_data[note_field(item.key)],
            }
            for item in self.items
            if self.cleaned_data.get(answer_field(item.key))
        ]

    def field_pairs(self) -> list[tuple[ReviewChecklistItem, Any, Any]]:
        return [
            (item, self[answer_field(item.key)], self[note_field(item.key)]) for item in self.items
        ]


class ConclusionForm(forms.Form):
    outcome = forms.ChoiceField(
        choices=Review.Outcome.choices,
        widget=forms.RadioSelect,
        label=_("Outcome"),
        help_text=_("Pass only when no item needs an action; pass with actions names them below."),
    )
    conclusion = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 4}),
        required=False,
        max_length=NOTE_MAX_CHARS,
        label=_("Conclusion"),
        help_text=_("What you found, in a few sentences; required to fail."),
    )
    next_due_on = forms.DateField(
        label=_("Next review due"),
        widget=forms.DateInput(attrs={"type": "date"}),
        help_text=_("Defaults to the service's cadence from today; choose sooner after a fail."),
    )

    def __init__(self, *args: Any, review: Review, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        today = timezone.now().astimezone(dt.UTC).date()
        self.fields["next_due_on"].initial = today + dt.timedelta(
            days=review.service.review_cadence_days
        )
        for n in range(1, ACTION_ROWS + 1):
            self.fields[f"action_{n}_description"] = forms.CharField(
                required=False,
                max_length=NOTE_MAX_CHARS,
                label=_("Action %(n)s") % {"n": n},
                help_text=_("What is to be done (leave empty for no action)."),
            )
            self.fields[f"action_{n}_owner"] = forms.CharField(
                required=False,
                max_length=150,
                label=_("Action %(n)s: owner") % {"n": n},
                help_text=_("The username of who does it."),
            )
            self.fields[f"action_{n}_due_on"] = forms.DateField(
                required=False,
                label=_("Action %(n)s: due") % {"n": n},
                widget=forms.DateInput(attrs={"type": "date"}),
                help_text=_("By when."),
            )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        for n in range(1, ACTION_ROWS + 1):
            given = [cleaned.get(f"action_{n}_{part}") for part in ("description", "owner")]
            due = cleaned.get(f"action_{n}_due_on")
            if any(given) or due:
                if not given[0]:
                    self.add_error(f"action_{n}_description", gettext("Say what is to be done."))
                if not given[1]:
                    self.add_error(f"action_{n}_owner", gettext("Name who does it (a username)."))
                if not due:
                    self.add_error(f"action_{n}_due_on", gettext("Say by when."))
        return cleaned

    def actions(self) -> list[dict[str, Any]]:
        """The rows filled in, as the verb takes them (`rows` remembers which they were)."""
        found = []
        self.rows: list[int] = []
        for n in range(1, ACTION_ROWS + 1):
            description = self.cleaned_data.get(f"action_{n}_description")
            if description:
                self.rows.append(n)
                found.append(
                    {
                        "description": description,
                        "owner": self.cleaned_data.get(f"action_{n}_owner") or "",
                        "due_on": self.cleaned_data.get(f"action_{n}_due_on"),
                    }
                )
        return found

    def action_rows(self) -> list[tuple[Any, Any, Any]]:
        return [
            (
                self[f"action_{n}_description"],
                self[f"action_{n}_owner"],
                self[f"action_{n}_due_on"],
            )
            for n in range(1, ACTION_ROWS + 1)
        ]

    def verb_field(self, name: str) -> str:
        """The form field a verb's refusal names (`actions[0].owner` → `action_1_owner`)."""
        if name.startswith("actions[") and "]." in name:
            index, _, part = name.removeprefix("actions[").partition("].")
            rows = getattr(self, "rows", [])
            if index.isdigit() and int(index) < len(rows):
                return f"action_{rows[int(index)]}_{part}"
        return name


class ActionDoneForm(forms.Form):
    note = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}),
        required=False,
        max_length=NOTE_MAX_CHARS,
        label=_("Note"),
        help_text=_("How it was done (a link, a set imported, a ticket)."),
    )


class ReassignForm(forms.Form):
    assignee = forms.CharField(
        max_length=150,
        label=_("Assignee"),
        help_text=_(
            "The username of a platform SRE, someone of security & compliance, or a "
            "model owner of the service's team."
        ),
    )
