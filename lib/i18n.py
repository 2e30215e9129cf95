"""The reader's language and time zone, for every request, without a query.

The language: the one the user chose (kept in the session, see
`ledger.services.preferences`), else what Django's LocaleMiddleware found (the switcher's
cookie, else the browser's Accept-Language). The time zone: the user's choice
(session), else the browser's (the `tz` cookie written by static/js/timezone.js),
else settings.TIME_ZONE. Times are stored in UTC; only their display moves.
"""

from __future__ import annotations

import zoneinfo
from collections.abc import Callable
from functools import lru_cache

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils import timezone, translation

SESSION_LANGUAGE = "preferred_language"
SESSION_TIME_ZONE = "preferred_time_zone"
TIME_ZONE_COOKIE = "tz"


@lru_cache(maxsize=1)
def known_time_zones() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones())


def is_time_zone(name: str) -> bool:
    return name in known_time_zones()


def is_language(code: str) -> bool:
    return code in dict(settings.LANGUAGES)


def remember(request: HttpRequest, *, language: str, time_zone: str) -> None:
    """Keep a user's choices in their session (blank: follow the browser)."""
    request.session[SESSION_LANGUAGE] = language if is_language(language) else ""
    request.session[SESSION_TIME_ZONE] = time_zone if is_time_zone(time_zone) else ""


def _chosen_time_zone(request: HttpRequest) -> str:
    session = getattr(request, "session", None)
    chosen = session.get(SESSION_TIME_ZONE, "") if session is not None else ""
    if chosen and is_time_zone(chosen):
        return chosen
    from_browser = request.COOKIES.get(TIME_ZONE_COOKIE, "")
    return from_browser if is_time_zone(from_browser) else ""


class UserPreferencesMiddleware:
    """After LocaleMiddleware and the session: a user's own choice outranks the browser's."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        session = getattr(request, "session", None)
        language = session.get(SESSION_LANGUAGE, "") if session is not None else ""
        if language and is_language(language):
            translation.activate(language)
            request.LANGUAGE_CODE = translation.get_language()
        zone = _chosen_time_zone(request)
        if zone:
            timezone.activate(zoneinfo.ZoneInfo(zone))
        else:
            timezone.deactivate()
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()
