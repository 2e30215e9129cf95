"""Query-string filters of the releases API.

Their help is the API's documentation, which stays English like the rest of the API:
marked with gettext_noop, never translated here.
"""

from __future__ import annotations

import django_filters
from django.utils.translation import gettext_noop

from ledger.models import Service
from lib.api import ApiFilterSet, IsoDateTimeFilter
from releases.models import Release


class ReleaseFilter(ApiFilterSet):
    service = django_filters.CharFilter(
        field_name="service__slug", help_text=gettext_noop("Service slug.")
    )
    tier = django_filters.ChoiceFilter(
        field_name="service__tier",
        choices=Service.Tier.choices,
        help_text=gettext_noop("Service tier."),
    )
    filed_by = django_filters.CharFilter(
        field_name="filed_by__username", help_text=gettext_noop("Username of the filer.")
    )
    created_after = IsoDateTimeFilter(field_name="created_at", lookup_expr="gte")
    created_before = IsoDateTimeFilter(field_name="created_at", lookup_expr="lt")

    class Meta:
        model = Release
        fields = ["state", "change_kind", "path", "to_revision"]
