"""The filters of the release list (kept in the URL, refreshed live with htmx)."""

from __future__ import annotations

import django_filters
from django import forms
from django.db.models import QuerySet
from django.utils.translation import gettext_lazy as _

from ledger.models import Service
from lib.forms import LiveFilterSet, shown_choices
from releases.models import Release


class ReleaseListFilter(LiveFilterSet):
    service = django_filters.CharFilter(
        field_name="service__slug",
        label=_("Service"),
        help_text=_("A service slug, e.g. kb-assistant."),
    )
    state = django_filters.ChoiceFilter(
        choices=Release.State.choices, empty_label=_("Any state"), label=_("State")
    )
    tier = django_filters.ChoiceFilter(
        field_name="service__tier",
        choices=Service.Tier.choices,
        empty_label=_("Any tier"),
        label=_("Service tier"),
    )
    change_kind = django_filters.ChoiceFilter(
        choices=shown_choices(Release.ChangeKind.choices),
        empty_label=_("Any change kind"),
        label=_("Change kind"),
    )
    path = django_filters.ChoiceFilter(
        choices=shown_choices(Release.Path.choices), empty_label=_("Any path"), label=_("Path")
    )
    filer = django_filters.CharFilter(
        field_name="filed_by__username", label=_("Filed by"), help_text=_("A username.")
    )
    date_from = django_filters.DateFilter(
        field_name="created_at",
        lookup_expr="date__gte",
        label=_("From"),
        widget=forms.DateInput(attrs={"type": "date"}),
        help_text=_("Filed on or after this day."),
    )
    date_to = django_filters.DateFilter(
        field_name="created_at",
        lookup_expr="date__lte",
        label=_("To"),
        widget=forms.DateInput(attrs={"type": "date"}),
        help_text=_("Filed on or before this day."),
    )

    class Meta:
        model = Release
        fields: list[str] = []

    def filter_queryset(self, queryset: QuerySet) -> QuerySet:
        start, end = self.form.cleaned_data.get("date_from"), self.form.cleaned_data.get("date_to")
        if start and end and start > end:
            self.form.add_error("date_to", _("The period ends before it starts."))
        return super().filter_queryset(queryset)
