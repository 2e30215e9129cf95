"""Query-string filters of the releases API."""

from __future__ import annotations

import django_filters

from ledger.models import Service
from lib.api import ApiFilterSet, IsoDateTimeFilter
from releases.models import Release


class ReleaseFilter(ApiFilterSet):
    service = django_filters.CharFilter(field_name="service__slug", help_text="Service slug.")
    tier = django_filters.ChoiceFilter(
        field_name="service__tier", choices=Service.Tier.choices, help_text="Service tier."
    )
    filed_by = django_filters.CharFilter(
        field_name="filed_by__username", help_text="Username of the filer."
    )
    created_after = IsoDateTimeFilter(field_name="created_at", lookup_expr="gte")
    created_before = IsoDateTimeFilter(field_name="created_at", lookup_expr="lt")

    class Meta:
        model = Release
        fields = ["state", "change_kind", "path", "to_revision"]
