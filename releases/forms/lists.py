"""The filters of the release list (kept in the URL, refreshed live with htmx)."""

from __future__ import annotations

import django_filters
from django import forms
from django.db.models import QuerySet

from ledger.models import Service
from lib.forms import LiveFilterSet
from releases.models import Release


class ReleaseListFilter(LiveFilterSet):
    service = django_filters.CharFilter(
        field_name="service__slug", label="Service", help_text="A service slug, e.g. kb-assistant."
    )
    state = django_filters.ChoiceFilter(choices=Release.State.choices, empty_label="Any state")
    tier = django_filters.ChoiceFilter(
        field_name="service__tier", choices=Service.Tier.choices, empty_label="Any tier"
    )
    change_kind = django_filters.ChoiceFilter(
        choices=Release.ChangeKind.choices, empty_label="Any change kind", label="Change kind"
    )
    path = django_filters.ChoiceFilter(choices=Release.Path.choices, empty_label="Any path")
    filer = django_filters.CharFilter(
        field_name="filed_by__username", label="Filed by", help_text="A username."
    )
    date_from = django_filters.DateFilter(
        field_name="created_at",
        lookup_expr="date__gte",
        label="From",
        widget=forms.DateInput(attrs={"type": "date"}),
        help_text="Filed on or after this day.",
    )
    date_to = django_filters.DateFilter(
        field_name="created_at",
        lookup_expr="date__lte",
        label="To",
        widget=forms.DateInput(attrs={"type": "date"}),
        help_text="Filed on or before this day.",
    )

    class Meta:
        model = Release
        fields: list[str] = []

    def filter_queryset(self, queryset: QuerySet) -> QuerySet:
        start, end = self.form.cleaned_data.get("date_from"), self.form.cleaned_data.get("date_to")
        if start and end and start > end:
            self.form.add_error("date_to", "The period ends before it starts.")
        return super().filter_queryset(queryset)
