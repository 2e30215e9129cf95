"""The service page: what is live and what it can do (ledger), its evidence against
the SLOs (ledger), whether it still behaves (replay), and what happened to it."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias, TypedDict, cast

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from ledger import charts, trend_charts
from ledger import queries as ledger_queries
from ledger.models import Event, Service
from ledger.permissions import can_edit_team_objects
from lib.actors import AuthenticatedHttpRequest
from lib.charts import FigureSpec, figure_spec
from releases import permissions
from releases.governance.queries import pages as page_queries
from releases.governance.queries import plan as plans
from releases.governance.queries import rollout as rollout_queries
from releases.models import RollbackEvent, UnauthorizedChange
from releases.reviews.queries import reviews as review_queries
from replay import queries as replay_queries

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

RECENT_EVENTS = 20
SERVING_SHOWN = 3
ROLLBACKS_SHOWN = 5


class EventPageAttrs(TypedDict):
    """Set by `service_detail` for the page."""

    changes: list[ledger_queries.FieldChange]
    note: ledger_queries.EventNote | None


EventForPage: TypeAlias = "WithAnnotations[Event, EventPageAttrs]"


def _service_for_page(slug: str) -> Service:
    return get_object_or_404(
        Service.objects.select_related(
            "team",
            "live_revision__model_asset__license",
            "live_revision__runtime",
            "live_revision__gateway_policy",
            "gateway_check",
        ),
        slug=slug,
    )


def _recent_events(service: Service) -> list[EventForPage]:
    """The last events of the service and everything that belongs to it, the model assets
    and runtimes its revisions use included (a license review of its asset, say)."""
    events = ledger_queries.events_of_service(Event.objects.all(), service.slug)
    return cast("list[EventForPage]", list(events.order_by("-sequence")[:RECENT_EVENTS]))


def _comparison_chart(comparison: ledger_queries.Comparison) -> FigureSpec:
    fig = charts.comparison_figure(
        comparison["live_points"],
        comparison["candidate_points"],
        live_label=f"live {comparison['live'].label}",
        candidate_label=f"candidate {comparison['candidate'].label}",
    )
    return figure_spec(charts.fit_to_page(fig))


def _run_trend_context(service: Service) -> dict[str, object]:
    """The daily run evidence section (templates/releases/_run_trend.html)."""
    trend = ledger_queries.run_trend(service)
    return {
        "trend": trend,
        "trend_days": ledger_queries.TREND_DAYS,
        "trend_rows": trend_charts.trend_rows(trend),
        "trend_chart": figure_spec(trend_charts.trend_figure(trend)) if trend["points"] else None,
    }


def _rollback_context(
    request: AuthenticatedHttpRequest,
    service: Service,
    serving: list[ledger_queries.ServingInterval],
) -> dict[str, object]:
    """The rollback section (templates/releases/_service_rollback.html)."""
    plan = plans.rollback_plan(service, serving)
    return {
        "plan": plan,
        "readiness": plans.plan_readiness(service, plan),
        "verification": (
            replay_queries.verification_means(plan.target) if plan.target is not None else None
        ),
        "can_verify": plan.target is not None
        and permissions.can_verify_rollback_target(request.user, service),
        "rollout_stage": rollout_queries.in_flight([service.pk]).get(service.pk),
        "unauthorized": list(
            UnauthorizedChange.objects.filter(service=service, reconciled_at__isnull=True)
            .select_related("backend", "expected_revision")
            .order_by("-detected_at")
        ),
        "rollbacks": list(
            RollbackEvent.objects.filter(service=service)
            .select_related("to_revision")
            .order_by("-started_at", "-pk")[:ROLLBACKS_SHOWN]
        ),
        "can_roll_back": permissions.can_record_rollback(request.user, service),
        "can_reconcile": permissions.can_reconcile(request.user, service),
    }


@require_GET
@login_required
def service_detail(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    service = _service_for_page(slug)
    live = service.live_revision
    revisions = ledger_queries.service_revisions(service)
    labels = {"live_revision": {r.pk: r.label for r in revisions}}
    events = _recent_events(service)
    ledger_queries.describe_for_timeline(events, labels)
    matrix = ledger_queries.slo_matrix(service)
    comparison = ledger_queries.live_vs_candidate(matrix)
    findings = ledger_queries.license_findings(service, live) if live else []
    open_releases, recent_releases = page_queries.service_releases(service)
    serving = ledger_queries.serving_history(service, limit=SERVING_SHOWN)
    context: dict[str, object] = {
        "service": service,
        "live": live,
        "open_releases": open_releases,
        "recent_releases": recent_releases,
        "findings": findings,
        "license_warnings": ledger_queries.license_warnings(findings),
        "capabilities": ledger_queries.capabilities_of(live) if live else [],
        "revisions": revisions,
        "events": events,
        "serving": serving,
        "shares": ledger_queries.share_history(service, limit=SERVING_SHOWN),
        "can_edit": can_edit_team_objects(request.user, service.team),
        # Replay composes onto the SRE's one screen: does it still behave?
        "health": replay_queries.live_health(service),
        "drift_flags": replay_queries.drift_flags(service),
        "regressions": replay_queries.regressions(service, limit=5),
        "matrix_columns": matrix["columns"],
        "matrix_blocks": matrix["revisions"],
        "goodput_target_pct": ledger_queries.GOODPUT_TARGET * 100,
        "comparison": comparison,
        "comparison_chart": _comparison_chart(comparison) if comparison else None,
    }
    context.update(_run_trend_context(service))
    context.update(_rollback_context(request, service, serving))
    context["reviews"] = review_queries.service_reviews(service)
    context["may_manage_reviews"] = permissions.can_manage_reviews(request.user)
    context["needs_plotly"] = comparison is not None or context["trend_chart"] is not None
    return render(request, "releases/service_detail.html", context)
