"""The cost pages: one service's and the fleet's, over a period the reader picks.

Both show the same numbers as a chart (the daily cost, tenants and idle stacked, with
the releases that reached 100 %) and as tables that need no JavaScript."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET

from ledger.models import Service
from lib.actors import AuthenticatedHttpRequest
from lib.charts import figure_spec
from releases import permissions
from releases.cost.charts import cost_figure
from releases.cost.report import CostReport, cost_report, last_days

PERIODS = (7, 30, 60, 90)
DEFAULT_PERIOD = 30


def _period(request: AuthenticatedHttpRequest) -> int:
    asked = request.GET.get("days", "")
    return int(asked) if asked in {str(days) for days in PERIODS} else DEFAULT_PERIOD


def _context(report: CostReport, days: int) -> dict:
    figure = cost_figure(report)
    return {
        "report": report,
        "chart": figure_spec(figure) if figure is not None else None,
        "days": days,
        "periods": PERIODS,
    }


def _allowed(request: AuthenticatedHttpRequest) -> None:
    if not permissions.can_view_cost(request.user):
        raise PermissionDenied(_("Sign in to read the cost."))


@require_GET
@login_required
def service_cost(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    _allowed(request)
    service = get_object_or_404(Service.objects.select_related("team"), slug=slug)
    days = _period(request)
    since, until = last_days(days)
    context = _context(cost_report(since, until, [service.slug]), days)
    return render(request, "releases/cost/service_cost.html", {**context, "service": service})


@require_GET
@login_required
def fleet_cost(request: AuthenticatedHttpRequest) -> HttpResponse:
    _allowed(request)
    days = _period(request)
    since, until = last_days(days)
    return render(
        request, "releases/cost/fleet_cost.html", _context(cost_report(since, until), days)
    )
