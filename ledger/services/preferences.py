"""A user's language and time zone: kept in UserPreference, mirrored into the session
at login and on every change, so that `lib.i18n.UserPreferencesMiddleware` applies
them without a query per request. A reading preference, not a record of the ledger:
no Event."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from ledger.models import UserPreference
from ledger.queries.preferences import preference_of
from lib import i18n


def save_preference(request: HttpRequest, preference: UserPreference) -> None:
    preference.save()
    i18n.remember(request, language=preference.language, time_zone=preference.time_zone)


def switch_language(request: HttpRequest, response: HttpResponse, language: str) -> None:
    """The top bar's switcher: remembered for the browser (a cookie), and as the
    user's preference when someone is logged in."""
    response.set_cookie(
        settings.LANGUAGE_COOKIE_NAME,
        language,
        max_age=settings.LANGUAGE_COOKIE_AGE,
        samesite="Lax",
        secure=settings.SESSION_COOKIE_SECURE,
    )
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        preference = preference_of(user)
        preference.language = language
        save_preference(request, preference)


def load_into_session(sender: Any, request: HttpRequest, user: Any, **kwargs: Any) -> None:
    """On login (the user_logged_in signal): the user's choices follow them to any browser."""
    preference = UserPreference.objects.filter(user=user).first()
    if preference is not None and request is not None and hasattr(request, "session"):
        i18n.remember(request, language=preference.language, time_zone=preference.time_zone)
