"""Filter sets of the list pages (the API has its own in `ledger.filters`)."""

from __future__ import annotations

import django_filters
from django import forms
from django.db.models import Q, QuerySet
from django.utils.translation import gettext_lazy as _

from ledger.engines import Engine
from ledger.models import Event, ModelAsset, Runtime, Service, TaskType, Team
from ledger.queries import events_of_service, subject_type_choices
from lib.forms import LiveFilterSet

# Choices whose labels stay English where they are stored or hashed (gettext_noop in the
# models), shown here in the reader's language.
ENGINE_CHOICES = [(value, _(label)) for value, label in Engine.choices]
APPROVAL_CHOICES = [(value, _(label)) for value, label in ModelAsset.LicenseApproval.choices]


class CatalogFilter(LiveFilterSet):
    q = django_filters.CharFilter(
        label=_("Search"), method="search", help_text=_("Slug, name or model of the live revision.")
    )
    tier = django_filters.ChoiceFilter(
        choices=Service.Tier.choices, empty_label=_("Any tier"), label=_("Tier")
    )
    team = django_filters.ModelChoiceFilter(
        queryset=Team.objects.all(),
        to_field_name="slug",
        empty_label=_("Any team"),
        label=_("Team"),
    )
    engine = django_filters.ChoiceFilter(
        field_name="live_revision__runtime__engine",
        choices=ENGINE_CHOICES,
        empty_label=_("Any engine"),
        label=_("Engine (live)"),
    )
    task_type = django_filters.ModelChoiceFilter(
        field_name="task_types",
        queryset=TaskType.objects.all(),
        to_field_name="slug",
        empty_label=_("Any task type"),
        label=_("Task type"),
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
        label=_("Search"), method="search", help_text=_("Name, revision, family or source.")
    )
    team = django_filters.ModelChoiceFilter(
        queryset=Team.objects.all(),
        to_field_name="slug",
        empty_label=_("Any team"),
        label=_("Team"),
    )
    quantization = django_filters.ChoiceFilter(
        choices=ModelAsset.Quantization.choices,
        empty_label=_("Any quantization"),
        label=_("Quantization"),
    )
    lifecycle = django_filters.ChoiceFilter(
        choices=ModelAsset.Lifecycle.choices, empty_label=_("Any lifecycle"), label=_("Lifecycle")
    )
    license_approval = django_filters.ChoiceFilter(
        choices=APPROVAL_CHOICES,
        empty_label=_("Any approval"),
        label=_("License approval"),
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
        label=_("Search"), method="search", help_text=_("Name, image or GPU model.")
    )
    team = django_filters.ModelChoiceFilter(
        queryset=Team.objects.all(),
        to_field_name="slug",
        empty_label=_("Any team"),
        label=_("Team"),
    )
    engine = django_filters.ChoiceFilter(
        choices=ENGINE_CHOICES, empty_label=_("Any engine"), label=_("Engine")
    )

    class Meta:
        model = Runtime
        fields: list[str] = []

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(
            Q(name__icontains=value) | Q(image__icontains=value) | Q(gpu_model__icontains=value)
        )


class EventListFilter(LiveFilterSet):
    subject_type = django_filters.ChoiceFilter(
        choices=subject_type_choices, empty_label=_("Any subject"), label=_("Subject type")
    )
    service = django_filters.CharFilter(
        method="of_service",
        label=_("Service"),
        help_text=_(
            "A service slug: its own events, its revisions', evidence's and runs', and "
            "those of the assets and runtimes it uses."
        ),
    )
    tier = django_filters.ChoiceFilter(
        field_name="service__tier",
        choices=Service.Tier.choices,
        empty_label=_("Any tier"),
        label=_("Tier"),
    )
    actor = django_filters.CharFilter(
        field_name="actor_label", label=_("Actor"), help_text=_("A username, or system.")
    )
    action = django_filters.CharFilter(
        lookup_expr="startswith",
        label=_("Action starts with"),
        help_text=_("An action or its start, e.g. service. or revision.created"),
    )
    date_from = django_filters.DateFilter(
        field_name="created_at",
        lookup_expr="date__gte",
        label=_("From"),
        widget=forms.DateInput(attrs={"type": "date"}),
        help_text=_("First day included."),
    )
    date_to = django_filters.DateFilter(
        field_name="created_at",
        lookup_expr="date__lte",
        label=_("To"),
        widget=forms.DateInput(attrs={"type": "date"}),
        help_text=_("Last day included."),
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
