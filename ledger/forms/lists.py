"""Filter sets of the list pages (the API has its own in `ledger.filters`)."""

from __future__ import annotations

import django_filters
from django import forms
from django.db.models import Q, QuerySet

from ledger.engines import Engine
from ledger.models import Event, ModelAsset, Runtime, Service, TaskType, Team
from ledger.queries import events_of_service, subject_type_choices
from lib.forms import LiveFilterSet


class CatalogFilter(LiveFilterSet):
    q = django_filters.CharFilter(
        label="Search", method="search", help_text="Slug, name or model of the live revision."
    )
    tier = django_filters.ChoiceFilter(choices=Service.Tier.choices, empty_label="Any tier")
    team = django_filters.ModelChoiceFilter(
        queryset=Team.objects.all(), to_field_name="slug", empty_label="Any team"
    )
    engine = django_filters.ChoiceFilter(
        field_name="live_revision__runtime__engine",
        choices=Engine.choices,
        empty_label="Any engine",
        label="Engine (live)",
    )
    task_type = django_filters.ModelChoiceFilter(
        field_name="task_types",
        queryset=TaskType.objects.all(),
        to_field_name="slug",
        empty_label="Any task type",
        label="Task type",
    )

    class Meta:
        model = Service
        fields: list[str] = []

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(
            Q(slug__icontains=value)
            | Q(name__icontains=value)
            | Q(live_revision__model_asset__name__icontains=value)
        )


class AssetListFilter(LiveFilterSet):
    q = django_filters.CharFilter(
        label="Search", method="search", help_text="Name, revision, family or source."
    )
    team = django_filters.ModelChoiceFilter(
        queryset=Team.objects.all(), to_field_name="slug", empty_label="Any team"
    )
    quantization = django_filters.ChoiceFilter(
        choices=ModelAsset.Quantization.choices, empty_label="Any quantization"
    )
    lifecycle = django_filters.ChoiceFilter(
        choices=ModelAsset.Lifecycle.choices, empty_label="Any lifecycle"
    )
    license_approval = django_filters.ChoiceFilter(
        choices=ModelAsset.LicenseApproval.choices,
        empty_label="Any approval",
        label="License approval",
    )

    class Meta:
        model = ModelAsset
        fields: list[str] = []

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(
            Q(name__icontains=value)
            | Q(revision__icontains=value)
            | Q(family__icontains=value)
            | Q(source_repository__icontains=value)
        )


class RuntimeListFilter(LiveFilterSet):
    q = django_filters.CharFilter(
        label="Search", method="search", help_text="Name, image or GPU model."
    )
    team = django_filters.ModelChoiceFilter(
        queryset=Team.objects.all(), to_field_name="slug", empty_label="Any team"
    )
    engine = django_filters.ChoiceFilter(choices=Engine.choices, empty_label="Any engine")

    class Meta:
        model = Runtime
        fields: list[str] = []

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(
            Q(name__icontains=value) | Q(image__icontains=value) | Q(gpu_model__icontains=value)
        )


class EventListFilter(LiveFilterSet):
    subject_type = django_filters.ChoiceFilter(
        choices=subject_type_choices, empty_label="Any subject", label="Subject type"
    )
    service = django_filters.CharFilter(
        method="of_service",
        label="Service",
        help_text="A service slug: its own events, its revisions', evidence's and runs', and "
        "those of the assets and runtimes it uses.",
    )
    tier = django_filters.ChoiceFilter(
        field_name="service__tier",
        choices=Service.Tier.choices,
        empty_label="Any tier",
        label="Tier",
    )
    actor = django_filters.CharFilter(
        field_name="actor_label", label="Actor", help_text="A username, or system."
    )
    action = django_filters.CharFilter(
        lookup_expr="startswith",
        help_text="An action or its start, e.g. service. or revision.created",
    )
    date_from = django_filters.DateFilter(
        field_name="created_at",
        lookup_expr="date__gte",
        label="From",
        widget=forms.DateInput(attrs={"type": "date"}),
        help_text="First day included.",
    )
    date_to = django_filters.DateFilter(
        field_name="created_at",
        lookup_expr="date__lte",
        label="To",
        widget=forms.DateInput(attrs={"type": "date"}),
        help_text="Last day included.",
    )

    class Meta:
        model = Event
        fields: list[str] = []

    def of_service(self, queryset: QuerySet[Event], name: str, value: str) -> QuerySet[Event]:
        return events_of_service(queryset, value)

    def filter_queryset(self, queryset: QuerySet) -> QuerySet:
        start, end = self.form.cleaned_data.get("date_from"), self.form.cleaned_data.get("date_to")
        if start and end and start > end:
            self.form.add_error("date_to", "The period ends before it starts.")
        return super().filter_queryset(queryset)
