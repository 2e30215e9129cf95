"""Query-string filters of the replay pages and of the replay REST API (django-filter).

Filters name related objects by their natural keys (backend name, sample set
name, service slug), the same keys the pages and serializers show.
"""

from __future__ import annotations

from collections.abc import Sequence

import django_filters
from django.db.models import Q, QuerySet
from django.utils.translation import gettext_lazy as _

from ledger.engines import Engine
from lib.api import ApiFilterSet, api_text
from lib.forms import LiveFilterSet
from replay.forms import latest_versions
from replay.models import Backend, Probe, Result, Run, Sample, SampleSet

# ---------------------------------------------------------------- pages


class BackendListFilter(LiveFilterSet):
    q = django_filters.CharFilter(
        label=_("Search"), method="search", help_text=_("Name, model, base URL or service.")
    )
    engine = django_filters.ChoiceFilter(
        choices=Engine.choices, empty_label=_("Any engine"), label=_("Engine")
    )
    enabled = django_filters.ChoiceFilter(
        choices=[("true", _("enabled")), ("false", _("disabled"))],
        method="filter_enabled",
        empty_label=_("Enabled or not"),
        label=_("State"),
    )

    class Meta:
        model = Backend
        fields: list[str] = []

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(
            Q(name__icontains=value)
            | Q(model_name__icontains=value)
            | Q(base_url__icontains=value)
            | Q(revision__service__slug__icontains=value)
        )

    def filter_enabled(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(enabled=value == "true")


class SampleSetListFilter(LiveFilterSet):
    q = django_filters.CharFilter(
        label=_("Search"),
        field_name="name",
        lookup_expr="icontains",
        help_text=_("Name of the set."),
    )

    class Meta:
        model = SampleSet
        fields: list[str] = []


class SampleFilter(LiveFilterSet):
    category = django_filters.ChoiceFilter(
        choices=Sample.Category.choices, empty_label=_("Any category"), label=_("Category")
    )

    class Meta:
        model = Sample
        fields: list[str] = []


def _backend_names(request) -> QuerySet:
    return Backend.objects.order_by("name")


class RunListFilter(LiveFilterSet):
    backend = django_filters.ModelChoiceFilter(
        queryset=_backend_names,
        to_field_name="name",
        empty_label=_("Any backend"),
        label=_("Backend"),
    )
    sample_set = django_filters.CharFilter(
        field_name="sample_set__name",
        label=_("Sample set"),
        help_text=_("Its name, e.g. kb-smoke."),
    )
    state = django_filters.ChoiceFilter(
        choices=Run.State.choices, empty_label=_("Any state"), label=_("State")
    )
    verdict = django_filters.ChoiceFilter(
        choices=Run.Verdict.choices, empty_label=_("Any verdict"), label=_("Verdict")
    )
    trigger = django_filters.ChoiceFilter(
        choices=Run.Trigger.choices, empty_label=_("Any trigger"), label=_("Trigger")
    )

    class Meta:
        model = Run
        fields: list[str] = []


class ResultFilter(LiveFilterSet):
    """The results of one run; the error codes offered are those the run produced."""

    outcome = django_filters.ChoiceFilter(
        choices=Result.Outcome.choices, empty_label=_("Any outcome"), label=_("Outcome")
    )
    category = django_filters.ChoiceFilter(
        field_name="sample__category",
        choices=Sample.Category.choices,
        empty_label=_("Any category"),
        label=_("Category"),
    )
    error_code = django_filters.ChoiceFilter(
        choices=[], empty_label=_("Any error code"), label=_("Error code")
    )

    class Meta:
        model = Result
        fields: list[str] = []

    def __init__(self, *args, error_codes: Sequence[str] = (), **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.filters["error_code"].extra["choices"] = [(code, code) for code in error_codes]


# ---------------------------------------------------------------- REST API


class BackendFilter(ApiFilterSet):
    service = django_filters.CharFilter(
        field_name="revision__service__slug", help_text=api_text("Slug of the service.")
    )
    revision = django_filters.NumberFilter(
        field_name="revision_id", help_text=api_text("Revision id.")
    )

    class Meta:
        model = Backend
        fields = ["engine", "enabled"]


class SampleSetFilter(ApiFilterSet):
    latest = django_filters.BooleanFilter(
        method="filter_latest", help_text=api_text("Only the newest version of each set.")
    )

    class Meta:
        model = SampleSet
        fields = ["name", "version"]

    def filter_latest(self, queryset: QuerySet, name: str, value: bool) -> QuerySet:
        if not value:
            return queryset
        return queryset.filter(pk__in=latest_versions().values("pk"))


class RunFilter(ApiFilterSet):
    backend = django_filters.CharFilter(
        field_name="backend__name", help_text=api_text("Backend name.")
    )
    sample_set = django_filters.CharFilter(
        field_name="sample_set__name", help_text=api_text("Sample set name (any version).")
    )
    sample_set_version = django_filters.NumberFilter(
        field_name="sample_set__version", help_text=api_text("Sample set version.")
    )
    revision = django_filters.NumberFilter(
        field_name="revision_id", help_text=api_text("Revision id.")
    )
    service = django_filters.CharFilter(
        field_name="revision__service__slug", help_text=api_text("Slug of the revision's service.")
    )

    class Meta:
        model = Run
        fields = ["state", "verdict", "trigger"]


class ProbeFilter(ApiFilterSet):
    reachable = django_filters.BooleanFilter()
    drifted = django_filters.BooleanFilter(
        method="filter_drifted", help_text=api_text("Only probes that found drift (or none).")
    )

    class Meta:
        model = Probe
        fields: list[str] = []

    def filter_drifted(self, queryset: QuerySet, name: str, value: bool) -> QuerySet:
        return queryset.exclude(drift=[]) if value else queryset.filter(drift=[])
