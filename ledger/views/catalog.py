"""The service catalog, the service page, and the service forms."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers

from ledger import services
from ledger.compliance import license_findings
from ledger.forms import CatalogFilter, ServiceForm
from ledger.models import Capability, Event, Service
from ledger.permissions import can_create_in_any_team, can_edit_team_objects
from ledger.views._common import (
    apply_errors,
    changed_values,
    editable_teams,
    ensure_can_create,
    event_changes,
    paginate,
    render_field,
    render_form,
    render_list,
    service_for_edit,
    with_display_values,
)
from ledger.views.evidence import service_evidence
from replay import queries as replay_queries

RECENT_EVENTS = 20


@require_GET
@login_required
@vary_on_headers("HX-Request")
def service_list(request: HttpRequest) -> HttpResponse:
    catalog = CatalogFilter(
        request.GET or None,
        queryset=Service.objects.for_catalog().order_by("slug"),
        request=request,
    )
    page = paginate(request, catalog.qs)
    context = {
        "filter": catalog,
        "page": page,
        "filtered": any(request.GET.get(name) for name in catalog.filters),
        "can_create": can_create_in_any_team(request.user),
    }
    return render_list(request, "ledger/service_list.html", context)


def _service_for_page(slug: str) -> Service:
    return get_object_or_404(
        Service.objects.select_related(
            "team", "live_revision__model_asset__license", "live_revision__runtime"
        ),
        slug=slug,
    )


def _recent_events(service: Service) -> list[Event]:
    """The last events of the service and everything that belongs to it (one indexed query)."""
    return list(Event.objects.filter(service=service).order_by("-sequence")[:RECENT_EVENTS])


@require_GET
@login_required
def service_detail(request: HttpRequest, slug: str) -> HttpResponse:
    service = _service_for_page(slug)
    live = service.live_revision
    revisions = list(service.revisions.with_parts().order_by("-number"))
    by_fingerprint: dict[str, list[str]] = {}
    for revision in sorted(revisions, key=lambda r: r.number):
        by_fingerprint.setdefault(revision.fingerprint, []).append(revision.label)
    for revision in revisions:
        revision.same_as = [
            label for label in by_fingerprint[revision.fingerprint] if label != revision.label
        ]
        revision.locks = revision.lock_reasons()
    labels = {"live_revision": {r.pk: r.label for r in revisions}}
    events = _recent_events(service)
    for event in events:
        event.changes = event_changes(event, labels)
    context = {
        "service": service,
        "live": live,
        "findings": license_findings(service, live) if live else [],
        "capabilities": (
            with_display_values(list(Capability.objects.filter(revision=live)), live.fingerprint)
            if live
            else []
        ),
        "revisions": revisions,
        "events": events,
        "can_edit": can_edit_team_objects(request.user, service.team),
        # Replay composes onto the SRE's one screen: does it still behave?
        "drift_flags": replay_queries.drift_flags(service),
        "regressions": replay_queries.regressions(service, limit=5),
        **service_evidence(service),
    }
    return render(request, "ledger/service_detail.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def service_create(request: HttpRequest) -> HttpResponse:
    teams = ensure_can_create(request.user)
    form = ServiceForm(
        request.POST if request.method == "POST" else None,
        teams=teams,
        validate_url=reverse("ledger:service_create_validate"),
    )
    if request.method == "POST" and form.is_valid():
        fields = dict(form.cleaned_data)
        try:
            service = services.create_service(
                actor=request.user, task_types=fields.pop("task_types"), **fields
            )
        except ValidationError as error:
            apply_errors(form, error)
        else:
            messages.success(request, f"Created service {service.slug}.")
            return redirect("ledger:service_detail", slug=service.slug)
    return render_form(
        request,
        form,
        title="New service",
        submit="Create service",
        cancel_url=reverse("ledger:service_list"),
    )


@require_POST
@login_required
def service_create_validate(request: HttpRequest) -> HttpResponse:
    teams = ensure_can_create(request.user)
    return render_field(request, ServiceForm(request.POST, validate_url=request.path, teams=teams))


@login_required
@require_http_methods(["GET", "POST"])
def service_edit(request: HttpRequest, slug: str) -> HttpResponse:
    service = service_for_edit(request, slug)
    title = f"Edit service {service.slug}"
    form = ServiceForm(
        request.POST if request.method == "POST" else None,
        instance=service,
        teams=editable_teams(request.user),
        validate_url=reverse("ledger:service_edit_validate", args=[service.slug]),
    )
    if request.method == "POST" and form.is_valid():
        changes = changed_values(form)
        task_types = changes.pop("task_types", None)
        # The form has written the typed values onto `service`; the verb
        # needs the row as stored to tell what changed.
        stored = Service.objects.select_related("team").get(pk=service.pk)
        try:
            changed = services.update_service(
                stored, actor=request.user, task_types=task_types, **changes
            )
        except ValidationError as error:
            apply_errors(form, error)
        else:
            messages.success(request, "Saved." if changed else "Nothing changed.")
            return redirect("ledger:service_detail", slug=stored.slug)
    return render_form(
        request,
        form,
        title=title,
        submit="Save service",
        cancel_url=reverse("ledger:service_detail", args=[slug]),
    )


@require_POST
@login_required
def service_edit_validate(request: HttpRequest, slug: str) -> HttpResponse:
    service = service_for_edit(request, slug)
    form = ServiceForm(
        request.POST,
        validate_url=request.path,
        instance=service,
        teams=editable_teams(request.user),
    )
    return render_field(request, form)
