"""Runtime pages and forms: engine, image, launch parameters, hardware."""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.db.models import Count, F
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods
from django.views.decorators.vary import vary_on_headers

from ledger import services
from ledger.forms import RuntimeForm, RuntimeListFilter
from ledger.models import Runtime
from ledger.permissions import (
    can_create,
    can_edit_team_objects,
    editable_teams,
    ensure_can_create,
    ensure_can_edit,
)
from lib.actors import AuthenticatedHttpRequest
from lib.http import post_only
from lib.pages import apply_errors, changed_values, paginate, render_field, render_form, render_list


@require_GET
@login_required
@vary_on_headers("HX-Request")
def runtime_list(request: AuthenticatedHttpRequest) -> HttpResponse:
    runtimes = RuntimeListFilter(
        request.GET or None,
        queryset=Runtime.objects.select_related("team")
        .annotate(revision_count=Count("revisions"))
        .order_by("name"),
        request=request,
    )
    context = {
        "filter": runtimes,
        "page": paginate(request, runtimes.qs),
        "filtered": any(request.GET.get(name) for name in runtimes.filters),
        "can_create": can_create(request.user),
    }
    return render_list(request, "ledger/runtime_list.html", context)


def _runtime(name: str) -> Runtime:
    return get_object_or_404(Runtime.objects.select_related("team"), name=name)


@require_GET
@login_required
def runtime_detail(request: AuthenticatedHttpRequest, name: str) -> HttpResponse:
    runtime = _runtime(name)
    parameters = [
        (key, json.dumps(value) if not isinstance(value, str) else value)
        for key, value in sorted(runtime.launch_parameters.items())
    ]
    revisions = list(
        runtime.revisions.select_related("service", "model_asset")
        .annotate(live_id=F("service__live_revision"))
        .order_by("service__slug", "-number")
    )
    context = {
        "runtime": runtime,
        "parameters": parameters,
        "warnings": services.runtime_warnings(runtime),
        "revisions": revisions,
        "lock_reasons": runtime.lock_reasons(),
        "can_edit": can_edit_team_objects(request.user, runtime.team),
    }
    return render(request, "ledger/runtime_detail.html", context)


def _prefill(name: str | None) -> dict:
    """'New runtime from this one': every field but its name."""
    source = Runtime.objects.filter(name=name).first() if name else None
    if source is None:
        return {}
    initial = {field: getattr(source, field) for field in Runtime.STATED_FIELDS if field != "name"}
    initial["team"] = source.team_id
    return initial


@login_required
@require_http_methods(["GET", "POST"])
def runtime_create(request: AuthenticatedHttpRequest) -> HttpResponse:
    teams = ensure_can_create(request.user)
    form = RuntimeForm(
        request.POST if request.method == "POST" else None,
        teams=teams,
        initial=_prefill(request.GET.get("from")),
        validate_url=reverse("ledger:runtime_create_validate"),
    )
    if request.method == "POST" and form.is_valid():
        try:
            runtime = services.create_runtime(actor=request.user, **form.cleaned_data)
        except ValidationError as error:
            apply_errors(form, error)
        else:
            messages.success(request, _("Created runtime %(runtime)s.") % {"runtime": runtime.name})
            return redirect("ledger:runtime_detail", name=runtime.name)
    return render_form(
        request,
        form,
        title=_("New runtime"),
        submit=_("Create runtime"),
        cancel_url=reverse("ledger:runtime_list"),
    )


@post_only("checks one field of the new-runtime form as you type", page="ledger:runtime_create")
@login_required
def runtime_create_validate(request: AuthenticatedHttpRequest) -> HttpResponse:
    teams = ensure_can_create(request.user)
    return render_field(request, RuntimeForm(request.POST, validate_url=request.path, teams=teams))


def _runtime_for_edit(request: AuthenticatedHttpRequest, name: str) -> Runtime:
    runtime = _runtime(name)
    ensure_can_edit(request.user, runtime.team)
    return runtime


@login_required
@require_http_methods(["GET", "POST"])
def runtime_edit(request: AuthenticatedHttpRequest, name: str) -> HttpResponse:
    runtime = _runtime_for_edit(request, name)
    lock_reasons = runtime.lock_reasons()
    form = None
    if not lock_reasons:
        form = RuntimeForm(
            request.POST if request.method == "POST" else None,
            instance=runtime,
            teams=editable_teams(request.user),
            validate_url=reverse("ledger:runtime_edit_validate", args=[name]),
        )
    if request.method == "POST" and form is not None and form.is_valid():
        stored = Runtime.objects.select_related("team").get(pk=runtime.pk)
        try:
            changed = services.update_runtime(stored, actor=request.user, **changed_values(form))
        except ValidationError as error:
            apply_errors(form, error)
        else:
            messages.success(request, "Saved." if changed else "Nothing changed.")
            return redirect("ledger:runtime_detail", name=name)
    return render_form(
        request,
        form,
        title=_("Edit runtime %(runtime)s") % {"runtime": name},
        submit=_("Save runtime"),
        cancel_url=reverse("ledger:runtime_detail", args=[name]),
        lock_reasons=lock_reasons,
        new_from_url=f"{reverse('ledger:runtime_create')}?from={name}",
        new_from_label=_("New runtime from this one"),
    )


@post_only("checks one field of the runtime form as you type", page="ledger:runtime_edit")
@login_required
def runtime_edit_validate(request: AuthenticatedHttpRequest, name: str) -> HttpResponse:
    runtime = _runtime_for_edit(request, name)
    form = RuntimeForm(
        request.POST,
        validate_url=request.path,
        instance=runtime,
        teams=editable_teams(request.user),
    )
    return render_field(request, form)
