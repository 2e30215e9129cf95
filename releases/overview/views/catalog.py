"""The service catalog: every service with what is live, and, from the releases app,
whether it could be rolled back now and whether a rollout is in flight (filters in the
URL, so a filtered list can be pasted in an incident channel)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from ledger.models import Service
from ledger.permissions import can_create
from ledger.roles import Role, has_role
from lib.actors import AuthenticatedHttpRequest
from lib.pages import paginate, render_list
from releases.cost.report import recent_cost
from releases.governance.queries import rollout as rollout_queries
from releases.overview.forms.catalog import ServiceCatalogFilter
from releases.reviews.queries import reviews as review_queries

# The catalog's cost column: the last 30 whole days.
CATALOG_COST_DAYS = 30


@require_GET
@login_required
@vary_on_headers("HX-Request")
def service_list(request: AuthenticatedHttpRequest) -> HttpResponse:
    catalog = ServiceCatalogFilter(
        request.GET or None,
        queryset=review_queries.with_review_status(
            Service.objects.for_catalog().select_related("readiness_record")
        ).order_by("slug"),
        request=request,
    )
    page = paginate(request, catalog.qs)
    in_flight = rollout_queries.in_flight(service.pk for service in page.object_list)
    costs = recent_cost([service.slug for service in page.object_list], CATALOG_COST_DAYS)
    for service in page.object_list:
        service.rollout_stage = in_flight.get(service.pk)
        service.cost_line = costs.by_service.get(service.slug)
    context = {
        "filter": catalog,
        "page": page,
        "filtered": any(request.GET.get(name) for name in catalog.filters),
        "can_create": can_create(request.user),
        "is_model_owner": has_role(request.user, Role.MODEL_OWNER),
        "today": review_queries.utc_today(),
        "cost_days": CATALOG_COST_DAYS,
        "cost_currency": costs.currency,
    }
    return render_list(request, "releases/service_list.html", context)
