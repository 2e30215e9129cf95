"""The service catalog's filters: the ledger's, plus rollback readiness, rollout and review."""

from __future__ import annotations

import django_filters
from django.db.models import QuerySet
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from ledger.forms import CatalogFilter
from releases.governance.queries.readiness import VERDICTS
from releases.models import Release, Stage
from releases.reviews.queries.reviews import REVIEW_FILTERS, filter_review_status

# The readiness verdicts as the filter names them (the records keep the English words).
_READINESS_WORDS = {
    "ready": pgettext_lazy("verdict", "ready"),
    "at risk": pgettext_lazy("verdict", "at risk"),
    "not ready": pgettext_lazy("verdict", "not ready"),
}


class ServiceCatalogFilter(CatalogFilter):
    """The catalog's filters, and how ready each service is to roll back."""

    readiness = django_filters.ChoiceFilter(
        field_name="readiness_record__verdict",
        choices=[(v, _READINESS_WORDS.get(v, v)) for v in VERDICTS]
        + [("unknown", _("not judged yet"))],
        empty_label=_("Any readiness"),
        label=_("Rollback readiness"),
        method="by_readiness",
        help_text=_("As of the last periodic refresh; the incident screen judges it live."),
    )
    rollout = django_filters.ChoiceFilter(
        choices=[
            ("in_flight", _("rolling out")),
            ("breached", _("a guard breached")),
            ("held", _("held for a person")),
        ],
        empty_label=_("Any rollout"),
        label=_("Rollout"),
        method="by_rollout",
    )

    review = django_filters.ChoiceFilter(
        choices=REVIEW_FILTERS,
        empty_label=_("Any review"),
        label=_("Review"),
        method="by_review",
        help_text=_("Overdue: an open review past its due date."),
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
