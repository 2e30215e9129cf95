"""What every app's pages share: paging, list rendering, htmx fragments, form errors.

Nothing here knows a model: the apps' views fetch, call their verbs and
render through these helpers.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django import forms
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.core.paginator import Page, Paginator
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import render
from django_htmx.http import push_url

PAGE_SIZE = 25


def paginate(request: HttpRequest, queryset: QuerySet, per_page: int = PAGE_SIZE) -> Page:
    return Paginator(queryset, per_page).get_page(request.GET.get("page"))


def wants_fragment(request: HttpRequest) -> bool:
    """An htmx swap, but not htmx restoring history, which needs the whole page."""
    htmx = getattr(request, "htmx", None)
    return bool(htmx and not htmx.history_restore_request)


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
    htmx = getattr(request, "htmx", None)
    name = htmx.trigger_name if htmx else None
    if not name or name not in form.fields or form.fields[name].disabled:
        return HttpResponseBadRequest("Name the field to validate in HX-Trigger-Name.")
    form.is_valid()
    warnings = getattr(form, "field_warnings", {}).get(name, [])
    return render(request, "lib/_form.html#field", {"field": form[name], "warnings": warnings})


def render_form(
    request: HttpRequest,
    form: forms.BaseForm | None,
    *,
    title: str,
    submit: str,
    cancel_url: str,
    **extra: Any,
) -> HttpResponse:
    """A form's page; with no form (nothing may change), the page says why (`lock_reasons`)."""
    return render(
        request,
        "lib/form.html",
        {"form": form, "title": title, "submit": submit, "cancel_url": cancel_url, **extra},
    )
