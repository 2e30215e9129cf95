"""Sign-in and sign-out pages: the login page, the provider's round trip, the refusals.

Every way the round trip can fail ends on a page of ours, never a 500: the provider
unreachable (503, naming it and the break-glass way in), and a callback refused — wrong
state, nonce, issuer or audience, an expired or forged token, a groups claim that is not
a list — (403), its reason in the log.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlencode

import requests
from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render, resolve_url
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET
from django.views.generic import View
from mozilla_django_oidc.views import (
    OIDCAuthenticationCallbackView,
    OIDCAuthenticationRequestView,
)

from ledger.oidc.discovery import ProviderUnavailable, enabled, provider_configuration
from ledger.roles import roles_of

logger = logging.getLogger(__name__)

BREAK_GLASS_PARAMETER = "break-glass"


def _provider_context() -> dict[str, Any]:
    return {
        "oidc_enabled": enabled(),
        "provider_name": settings.OIDC_PROVIDER_NAME,
        "break_glass_url": f"{reverse('login')}?{BREAK_GLASS_PARAMETER}=1",
        "local_login": settings.LOCAL_LOGIN,
    }


def provider_unavailable(request: HttpRequest, error: Exception) -> HttpResponse:
    logger.warning("oidc sign-in: provider unavailable: %s", error)
    return render(request, "registration/oidc_unavailable.html", _provider_context(), status=503)


def sign_in_refused(request: HttpRequest, reason: str) -> HttpResponse:
    # The reason goes to the log; the page says what a person can do about it.
    logger.warning("oidc sign-in refused: %s", reason)
    return render(request, "registration/oidc_refused.html", _provider_context(), status=403)


class LoginView(auth_views.LoginView):
    """Django's login page, offering the provider; with LOCAL_LOGIN off the password
    form is shown only at ?break-glass=1 (LocalPasswordBackend still decides who)."""

    redirect_authenticated_user = True

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context.update(_provider_context())
        break_glass = self.request.GET.get(BREAK_GLASS_PARAMETER) == "1"
        context["break_glass"] = break_glass and not settings.LOCAL_LOGIN
        context["show_password_form"] = settings.LOCAL_LOGIN or break_glass or not enabled()
        next_url = context.get("next") or ""
        context["oidc_url"] = reverse("oidc:authenticate") + (
            f"?{urlencode({'next': next_url})}" if next_url else ""
        )
        return context


class LogoutView(auth_views.LogoutView):
    """Django's sign-out, then the provider's (RP-initiated logout) when the person signed
    in through it and its discovery names an end_session_endpoint."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        id_token = request.session.get("oidc_id_token")
        response = super().post(request, *args, **kwargs)
        if not (id_token and enabled()):
            return response
        try:
            endpoint = provider_configuration().get("end_session_endpoint")
        except ProviderUnavailable:
            return response  # signed out here; the provider's session outlives it
        if not endpoint:
            return response
        query = urlencode(
            {
                "id_token_hint": id_token,
                "post_logout_redirect_uri": request.build_absolute_uri(
                    resolve_url(settings.LOGOUT_REDIRECT_URL)
                ),
                "client_id": settings.OIDC_CLIENT_ID,
            }
        )
        return HttpResponseRedirect(f"{endpoint}?{query}")


class AuthenticateView(OIDCAuthenticationRequestView):
    """Off to the provider's login page, with state, nonce and a PKCE challenge."""

    def __init__(self, **kwargs: Any) -> None:
        # Not the library's __init__: it reads the endpoint before a fault can be answered.
        View.__init__(self, **kwargs)

    def get(self, request: HttpRequest) -> HttpResponse:
        if not enabled():
            raise Http404
        try:
            configuration = provider_configuration()
        except ProviderUnavailable as error:
            return provider_unavailable(request, error)
        self.OIDC_OP_AUTH_ENDPOINT = configuration["authorization_endpoint"]
        self.OIDC_RP_CLIENT_ID = settings.OIDC_CLIENT_ID
        return super().get(request)


class CallbackView(OIDCAuthenticationCallbackView):
    """The provider's redirect back: the library checks the state, swaps the code (with
    the PKCE verifier) for tokens and ProviderBackend checks them; any refusal is ours to
    answer. `next` was checked against this host when the round trip began."""

    def get(self, request: HttpRequest) -> HttpResponse:
        if not enabled():
            raise Http404
        try:
            return super().get(request)
        except ProviderUnavailable as error:
            return provider_unavailable(request, error)
        except SuspiciousOperation as error:
            return sign_in_refused(request, str(error))
        except requests.HTTPError as error:
            # The token endpoint said no (a reused code, a PKCE verifier that does not match).
            status = error.response.status_code if error.response is not None else "?"
            return sign_in_refused(request, f"token endpoint answered {status}")
        except requests.RequestException as error:
            return provider_unavailable(request, error)

    def login_failure(self) -> HttpResponse:
        request = self.request
        reason = getattr(request, "oidc_refusal", None)
        if reason is None and request.GET.get("error"):
            reason = f"the provider answered {request.GET['error']!r}"
        user = getattr(self, "user", None)
        if reason is None and user is not None and not user.is_active:
            reason = f"account {user.get_username()!r} is deactivated"
        if reason is None and "oidc_states" not in request.session:
            reason = "no sign-in was started in this browser session (state unknown)"
        return sign_in_refused(request, reason or "the sign-in did not complete")

    def login_success(self) -> HttpResponse:
        response = super().login_success()
        if not roles_of(self.user):
            return HttpResponseRedirect(reverse("oidc:no_role"))
        return response


@require_GET
@login_required
def no_role(request: HttpRequest) -> HttpResponse:
    """Signed in, with no role: what to ask for, and of whom."""
    user: User = request.user  # type: ignore[assignment]
    granting = sorted(group for group, grant in settings.OIDC_GROUP_MAP.items() if grant["roles"])
    # Never the break-glass account: its name is half of what opens it.
    administrators = (
        User.objects.filter(is_superuser=True, is_active=True)
        .exclude(username=settings.BREAK_GLASS_USERNAME or None)
        .order_by("username")
    )
    return render(
        request,
        "registration/oidc_no_role.html",
        {
            **_provider_context(),
            "has_roles": bool(roles_of(user)),
            "granting_groups": granting,
            "administrators": administrators,
            "title": _("No role yet"),
        },
    )
