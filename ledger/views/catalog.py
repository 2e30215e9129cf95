"""The service forms (the catalog and the service page are `releases.overview.views`: they show
what replay and the releases know of each service too)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods

from ledger import services
from ledger.forms import ServiceForm
from ledger.models import Service
from ledger.permissions import editable_teams, ensure_can_create
from ledger.views._common import service_for_edit
from lib.actors import AuthenticatedHttpRequest
from lib.http import post_only
from lib.pages import apply_errors, changed_values, render_field, render_form


@login_required
@require_http_methods(["GET", "POST"])
def service_create(request: AuthenticatedHttpRequest) -> HttpResponse:
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
            messages.success(request, _("Created service %(service)s.") % {"service": service.slug})
            return redirect("releases:service_detail", slug=service.slug)
    return render_form(
        request,
        form,
        title=_("New service"),
        submit=_("Create service"),
        cancel_url=reverse("releases:service_list"),
    )


@post_only("checks one field of the new-service form as you type", page="ledger:service_create")
@login_required
def service_create_validate(request: AuthenticatedHttpRequest) -> HttpResponse:
    teams = ensure_can_create(request.user)
    return render_field(request, ServiceForm(request.POST, validate_url=request.path, teams=teams))


@login_required
@require_http_methods(["GET", "POST"])
def service_edit(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    service = service_for_edit(request, slug)
    title = _("Edit service %(service)s") % {"service": service.slug}
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
            return redirect("releases:service_detail", slug=stored.slug)
    return render_form(
        request,
        form,
        title=title,
        submit=_("Save service"),
        cancel_url=reverse("releases:service_detail", args=[slug]),
    )


@post_only("checks one field of the service form as you type", page="ledger:service_edit")
@login_required
def service_edit_validate(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    service = service_for_edit(request, slug)
    form = ServiceForm(
        request.POST,
        validate_url=request.path,
        instance=service,
        teams=editable_teams(request.user),
    )
    return render_field(request, form)
