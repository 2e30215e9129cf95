"""A user's language and time zone: kept in UserPreference, mirrored into the session
at login and on every change, so that `lib.i18n.UserPreferencesMiddleware` applies
them without a query per request. A reading preference, not a record of the ledger:
no Event."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from ledger.models import UserPreference
from lib import i18n


def save_preference(request: HttpRequest, preference: UserPreference) -> None:
    preference.save()
    i18n.remember(request, language=preference.language, time_zone=preference.time_zone)


def switch_language(request: HttpRequest, response: HttpResponse, language: str) -> None:
    """The top bar's switcher: this browser's language (a cookie), and this session's,
    so that it outranks the account's preference until the next login. The account's
    stored preference changes only on the Preferences page (`save_preference`)."""
    response.set_cookie(
        settings.LANGUAGE_COOKIE_NAME,
        language,
        max_age=settings.LANGUAGE_COOKIE_AGE,
        path=settings.LANGUAGE_COOKIE_PATH,
        domain=settings.LANGUAGE_COOKIE_DOMAIN,
        samesite="Lax",
        secure=settings.SESSION_COOKIE_SECURE,
    )
    session = getattr(request, "session", None)
    if session is not None and session.get(i18n.SESSION_LANGUAGE):
        session[i18n.SESSION_LANGUAGE] = language


def load_into_session(sender: Any, request: HttpRequest, user: Any, **kwargs: Any) -> None:
    """On login (the user_logged_in signal): the user's choices follow them to any browser."""
    preference = UserPreference.objects.filter(user=user).first()
    if preference is not None and request is not None and hasattr(request, "session"):
        i18n.remember(request, language=preference.language, time_zone=preference.time_zone)
