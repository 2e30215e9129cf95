"""The user's own page: the language and time zone their pages are shown in, and the
top bar's language switcher."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils import translation
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST

from ledger.forms.preferences import LanguageSwitchForm, PreferenceForm
from ledger.queries.preferences import preference_of
from ledger.services.preferences import save_preference, switch_language
from lib.actors import AuthenticatedHttpRequest


@login_required
@require_http_methods(["GET", "POST"])
def preferences(request: AuthenticatedHttpRequest) -> HttpResponse:
    preference = preference_of(request.user)
    form = PreferenceForm(request.POST if request.method == "POST" else None, instance=preference)
    if request.method == "POST" and form.is_valid():
        save_preference(request, form.save(commit=False))
        if form.instance.language:
            translation.activate(form.instance.language)
        messages.success(request, _("Your preferences are saved."))
        return HttpResponseRedirect(reverse("ledger:preferences"))
    return render(
        request,
        "ledger/preferences.html",
        {"form": form, "time_zone_names": PreferenceForm.time_zone_names()},
    )


def _safe_next(request: HttpRequest, wanted: str) -> str:
    if wanted and url_has_allowed_host_and_scheme(
        wanted, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return wanted
    return reverse("home")


@require_POST
def set_language(request: HttpRequest) -> HttpResponse:
    """The switcher in the top bar (open to anyone, the login page included)."""
    form = LanguageSwitchForm(request.POST)
    if not form.is_valid():
        refusals = [str(error) for error in form.errors.get("language", [])]
        messages.error(request, " ".join(refusals) or _("Choose a language."))
        return HttpResponseRedirect(_safe_next(request, request.POST.get("next", "")))
    response = HttpResponseRedirect(_safe_next(request, form.cleaned_data["next"]))
    switch_language(request, response, form.cleaned_data["language"])
    return response
