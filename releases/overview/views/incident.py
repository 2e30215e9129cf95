"""The SRE's incident screen: one page, readable on a phone under stress, that says what
is live, where a rollback goes and whether it is safe, what the gateway should be doing,
and what to check first; and the search that leads to it. It reads the governance and
gateway rooms, so it lives here."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.db.models import Q
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET

from ledger import queries as ledger_queries
from ledger.models import Service
from ledger.traces.otlp import TRACE_ID
from lib.actors import AuthenticatedHttpRequest
from lib.aggregates import split
from lib.pages import wants_fragment
from releases import permissions
from releases.gateway.queries import service_gateway
from releases.governance import playbooks
from releases.governance.queries.incident import changed_revision_labels, incident, incident_service

SEARCH_LISTED = 20


@require_GET
@login_required
def incident_screen(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    try:
        service = incident_service(slug)
    except Service.DoesNotExist:
        raise Http404(f"There is no service {slug!r}.") from None
    symptom = request.GET.get("symptom", "")
    screen = incident(service, symptom=symptom)
    labels = {"live_revision": changed_revision_labels(screen)}
    ledger_queries.describe_for_timeline(screen.changes, labels)
    context = {
        "incident": screen,
        "service": service,
        "live": service.live_revision,
        "gateway": service_gateway(service, split(getattr(service, "task_type_list", ""))),
        "modes": playbooks.FAILURE_MODES,
        "symptom": symptom,
        "can_roll_back": permissions.can_record_rollback(request.user, service),
        "can_check_gateway": permissions.can_reconcile(request.user, service),
        "can_verify": screen.plan.target is not None
        and permissions.can_verify_rollback_target(request.user, service),
    }
    if wants_fragment(request):
        return render(request, "releases/incident.html#live-parts", context)
    return render(request, "releases/incident.html", context)


@require_GET
@login_required
def search(request: AuthenticatedHttpRequest) -> HttpResponse:
    """A few letters of a service or of its live model's name; one match goes straight to
    its incident screen. A trace id (32 hex digits) goes to its explanation."""
    words = request.GET.get("q", "").strip()[:100]
    if TRACE_ID.match(words.lower()):
        return redirect(f"{reverse('releases:explain')}?{urlencode({'trace_id': words.lower()})}")
    matches = Service.objects.none()
    if words:
        matches = (
            Service.objects.filter(
                Q(slug__icontains=words)
                | Q(name__icontains=words)
                | Q(live_revision__model_asset__name__icontains=words)
            )
            .select_related("team", "live_revision__model_asset")
            .order_by("slug")
        )
    found = list(matches[: SEARCH_LISTED + 1])
    if len(found) == 1:
        return redirect("releases:incident", slug=found[0].slug)
    context = {"q": words, "matches": found[:SEARCH_LISTED], "more": len(found) > SEARCH_LISTED}
    return render(request, "releases/search.html", context)
