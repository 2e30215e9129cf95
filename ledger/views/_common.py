"""What the registry's page views share: paging, permission, error mapping, partials."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.core.exceptions import NON_FIELD_ERRORS, PermissionDenied, ValidationError
from django.core.paginator import Page, Paginator
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, render
from django_htmx.http import push_url

from ledger.models import Service, Team

# The domain's own check, re-exported: a view answers 403 before showing a form.
from ledger.permissions import ensure_can_edit
from ledger.roles import Role, has_role

PAGE_SIZE = 25


def paginate(request: HttpRequest, queryset: QuerySet, per_page: int = PAGE_SIZE) -> Page:
    return Paginator(queryset, per_page).get_page(request.GET.get("page"))


def wants_fragment(request: HttpRequest) -> bool:
    """An htmx swap, but not htmx restoring history, which needs the whole page."""
    return bool(request.htmx) and not request.htmx.history_restore_request


def clean_url(request: HttpRequest) -> str:
    """The page's address without empty filters or page 1: short enough to paste in a chat."""
    pairs = [
        (key, value)
        for key, values in request.GET.lists()
        for value in values
        if value and not (key == "page" and value == "1")
    ]
    return request.path + (f"?{urlencode(pairs)}" if pairs else "")


def render_list(request: HttpRequest, template: str, context: dict[str, Any]) -> HttpResponse:
    """A list page, or only its results partial when htmx filters or pages it."""
    if wants_fragment(request):
        return push_url(render(request, f"{template}#results", context), clean_url(request))
    return render(request, template, context)


# ---------------------------------------------------------------- permission


def editable_teams(user) -> QuerySet[Team]:
    """The teams whose services, assets and runtimes this person may change."""
    if user.is_superuser:
        return Team.objects.all()
    if has_role(user, Role.MODEL_OWNER):
        return Team.objects.filter(members=user)
    return Team.objects.none()


def ensure_can_create(user) -> QuerySet[Team]:
    teams = editable_teams(user)
    if not teams.exists():
        raise PermissionDenied("Only model owners who belong to a team can add to the registry.")
    return teams


def service_for_edit(request: HttpRequest, slug: str) -> Service:
    """The service of a form that changes it or adds to it: 404, or 403 unless editable."""
    service = get_object_or_404(Service.objects.select_related("team"), slug=slug)
    ensure_can_edit(request.user, service.team)
    return service


# ---------------------------------------------------------------- forms


def apply_errors(form: forms.BaseForm, error: ValidationError) -> None:
    """Put a verb's refusal onto the form: beside its field, or in the summary."""
    if not hasattr(error, "error_dict"):
        form.add_error(None, error.messages)
        return
    for name, messages in error.message_dict.items():
        if name in form.fields and not form.fields[name].disabled:
            form.add_error(name, messages)
        elif name == NON_FIELD_ERRORS:
            form.add_error(None, messages)
        else:
            form.add_error(None, [f"{name.replace('_', ' ')}: {message}" for message in messages])


def changed_values(form: forms.BaseForm) -> dict[str, Any]:
    return {name: form.cleaned_data[name] for name in form.changed_data}


def render_field(request: HttpRequest, form: forms.BaseForm) -> HttpResponse:
    """Validate the whole form and answer with the partial of the field that fired."""
    name = request.htmx.trigger_name if request.htmx else None
    if not name or name not in form.fields or form.fields[name].disabled:
        return HttpResponseBadRequest("Name the field to validate in HX-Trigger-Name.")
    form.is_valid()
    context = {"field": form[name], "warnings": form.field_warnings.get(name, [])}
    return render(request, "ledger/_form.html#field", context)


def render_form(
    request: HttpRequest,
    form: forms.BaseForm,
    *,
    title: str,
    submit: str,
    cancel_url: str,
    **extra: Any,
) -> HttpResponse:
    return render(
        request,
        "ledger/form.html",
        {"form": form, "title": title, "submit": submit, "cancel_url": cancel_url, **extra},
    )


# ---------------------------------------------------------------- events


def event_changes(event, labels: dict[str, dict[Any, str]] | None = None) -> list[dict[str, Any]]:
    """The fields an update event changed, before and after, ready to show.

    `labels` turns ids into words for relation fields, e.g.
    {"live_revision": {12: "r3"}}.
    """
    data = event.payload_data
    before, after = data.get("before"), data.get("after")
    if not isinstance(before, dict) or not isinstance(after, dict):
        return []
    labels = labels or {}
    return [
        {
            "field": name,
            "before": _shown(before.get(name), labels.get(name)),
            "after": _shown(after[name], labels.get(name)),
        }
        for name in sorted(after)
    ]


def _shown(value: Any, names: dict[Any, str] | None = None) -> str:
    if names and isinstance(value, int | str) and value in names:
        return names[value]
    if value is None or value == "":
        return "(empty)"
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def with_display_values(capabilities: list, fingerprint: str) -> list:
    """Capabilities with their value as JSON text, and whether a verification is stale."""
    for capability in capabilities:
        capability.value_json = json.dumps(capability.value, ensure_ascii=False, sort_keys=True)
        capability.stale = (
            capability.status == "verified" and capability.verified_fingerprint != fingerprint
        )
    return capabilities
