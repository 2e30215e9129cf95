"""The filters of the release list (kept in the URL, refreshed live with htmx)."""

from __future__ import annotations

import django_filters
from django import forms
from django.db.models import QuerySet

from ledger.forms import CatalogFilter
from ledger.models import Service
from lib.forms import LiveFilterSet
from releases.models import Release, Stage
from releases.queries.readiness import VERDICTS
from releases.queries.reviews import REVIEW_FILTERS, filter_review_status


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


class ServiceCatalogFilter(CatalogFilter):
    """The catalog's filters, and how ready each service is to roll back."""

    readiness = django_filters.ChoiceFilter(
        field_name="readiness_record__verdict",
        choices=[(v, v) for v in VERDICTS] + [("unknown", "not judged yet")],
        empty_label="Any readiness",
        label="Rollback readiness",
        method="by_readiness",
        help_text="As of the last periodic refresh; the incident screen judges it live.",
    )
    rollout = django_filters.ChoiceFilter(
        choices=[
            ("in_flight", "rolling out"),
            ("breached", "a guard breached"),
            ("held", "held for a person"),
        ],
        empty_label="Any rollout",
        label="Rollout",
        method="by_rollout",
    )

    review = django_filters.ChoiceFilter(
        choices=REVIEW_FILTERS,
        empty_label="Any review",
        label="Review",
        method="by_review",
        help_text="Overdue: an open review past its due date.",
    )

    def by_review(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return filter_review_status(queryset, value)

    def by_readiness(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        if value == "unknown":
            return queryset.filter(readiness_record__isnull=True)
        return queryset.filter(readiness_record__verdict=value)

    def by_rollout(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        stages = Stage.objects.filter(release__state=Release.State.ROLLING_OUT)
        stages = stages.filter(state__in=Stage.ACTIVE_STATES if value == "in_flight" else [value])
        return queryset.filter(pk__in=stages.values("release__service_id"))
