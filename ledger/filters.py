"""Query-string filters of the REST API (django-filter), one FilterSet per list endpoint.

Filters name related objects by their natural keys (team slug, SPDX id,
runtime name), the same keys the serializers show.
"""

from __future__ import annotations

import django_filters
from django.db.models import Q, QuerySet
from django.utils.translation import gettext_lazy as _

from ledger.engines import Engine
from ledger.models import (
    Capability,
    Event,
    License,
    ModelAsset,
    Revision,
    Runtime,
    Service,
    Team,
)
from ledger.queries import events_of_service
from lib.api import ApiFilterSet, IsoDateTimeFilter


class TeamFilter(ApiFilterSet):
    member = django_filters.CharFilter(
        field_name="members__username", distinct=True, help_text=_("Username of a member.")
    )

    class Meta:
        model = Team
        fields = ["slug"]


class LicenseFilter(ApiFilterSet):
    class Meta:
        model = License
        fields = ["kind", "gated"]


class ServiceFilter(ApiFilterSet):
    team = django_filters.CharFilter(field_name="team__slug", help_text=_("Team slug."))
    engine = django_filters.ChoiceFilter(
        field_name="live_revision__runtime__engine",
        choices=Engine.choices,
        help_text=_("Engine of the live revision's runtime."),
    )
    task_type = django_filters.CharFilter(
        field_name="task_types__slug", distinct=True, help_text=_("Slug of a task type served.")
    )
    q = django_filters.CharFilter(method="search", help_text=_("Words in the slug or name."))

    class Meta:
        model = Service
        fields = ["tier", "exposure"]

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(Q(slug__icontains=value) | Q(name__icontains=value))


class ModelAssetFilter(ApiFilterSet):
    team = django_filters.CharFilter(field_name="team__slug", help_text=_("Team slug."))
    license = django_filters.CharFilter(field_name="license__spdx_id", help_text=_("SPDX id."))
    q = django_filters.CharFilter(method="search", help_text=_("Words in the name or source."))

    class Meta:
        model = ModelAsset
        fields = [
            "family",
            "quantization",
            "lifecycle",
            "license_approval",
            "derivation",
            "derived_from",
            "weights_digest",
        ]

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(Q(name__icontains=value) | Q(source_repository__icontains=value))


class RuntimeFilter(ApiFilterSet):
    team = django_filters.CharFilter(field_name="team__slug", help_text=_("Team slug."))
    q = django_filters.CharFilter(field_name="name", lookup_expr="icontains")

    class Meta:
        model = Runtime
        fields = ["engine", "engine_version", "gpu_model"]


class RevisionFilter(ApiFilterSet):
    service = django_filters.CharFilter(field_name="service__slug", help_text=_("Service slug."))
    team = django_filters.CharFilter(field_name="service__team__slug", help_text=_("Team slug."))
    runtime = django_filters.CharFilter(field_name="runtime__name", help_text=_("Runtime name."))
    engine = django_filters.ChoiceFilter(field_name="runtime__engine", choices=Engine.choices)
    served = django_filters.BooleanFilter(
        field_name="served_at", lookup_expr="isnull", exclude=True, help_text=_("Has it been live?")
    )
    gateway_policy_version = django_filters.CharFilter(
        field_name="gateway_policy__label",
        help_text=_("How revisions name a gateway policy version: v2, or gw-2026.03."),
    )

    class Meta:
        model = Revision
        fields = ["fingerprint", "model_asset"]


class CapabilityFilter(ApiFilterSet):
    service = django_filters.CharFilter(
        field_name="revision__service__slug", help_text=_("Service slug.")
    )

    class Meta:
        model = Capability
        fields = ["revision", "kind", "status"]


class EventFilter(ApiFilterSet):
    service = django_filters.CharFilter(
        method="of_service",
        help_text=_(
            "Events of one service (by slug) and everything that belongs to it: its "
            "revisions, capabilities, evidence and runs, and the model assets, runtimes and "
            "license acceptances its revisions use."
        ),
    )
    tier = django_filters.ChoiceFilter(field_name="service__tier", choices=Service.Tier.choices)
    actor = django_filters.CharFilter(
        field_name="actor_label", help_text=_("Username at the time, or 'system'.")
    )
    created_after = IsoDateTimeFilter(
        field_name="created_at", lookup_expr="gte", help_text=_("ISO 8601, inclusive.")
    )
    created_before = IsoDateTimeFilter(
        field_name="created_at", lookup_expr="lt", help_text=_("ISO 8601, exclusive.")
    )

    class Meta:
        model = Event
        fields = ["subject_type", "subject_id", "action"]

    def of_service(self, queryset: QuerySet[Event], name: str, value: str) -> QuerySet[Event]:
        return events_of_service(queryset, value)
