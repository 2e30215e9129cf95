"""Limits on guessing: password sign-ins (django-axes) and API tokens (DRF).

Both count per client address, read the way DRF's throttles read it: REMOTE_ADDR,
or, behind NUM_PROXIES proxies that append to X-Forwarded-For, the entry the
nearest of them wrote (NUM_PROXIES from the right). Whatever the client put
further left is never believed, so a forged header changes nothing.

Sign-ins: axes counts failed passwords on every page that calls
`authenticate(request, ...)`: the site's login and the admin's. Two limits lock
(`SignInHandler`): LOGIN_FAILURE_LIMIT failures in a row for one username from one
address lock that username there (elsewhere it still signs in, and the others at
that address too: an office behind one egress is not locked out by one person's
typos, or by someone who wants it locked out); LOGIN_ADDRESS_FAILURE_LIMIT failures
from one address, whatever the usernames, lock the address (guessing spread over
many usernames). `lockout_response` is the page it then shows.

API tokens: DRF authenticates, then checks permissions, then throttles. A wrong
token is answered 401 at the first step and never reaches a throttle, so
`TokenAuthentication` counts wrong tokens per address itself (API_WRONG_TOKEN_RATE);
past the rate that address gets 429 for any token until the window has passed.
Valid tokens then meet UserRateThrottle (per user). A request with no credentials
at all is answered 401 by IsAuthenticated before AnonRateThrottle would count it;
that answer costs no query.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from typing import TYPE_CHECKING, Any, cast

from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_cool_off, get_failure_limit
from django.conf import settings
from django.db.models import QuerySet, Sum
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from rest_framework import authentication, exceptions
from rest_framework.throttling import BaseThrottle, SimpleRateThrottle

from lib.durations import in_words

if TYPE_CHECKING:
    from rest_framework.request import Request


def client_ip(request: HttpRequest) -> str | None:
    """The client's address (AXES_CLIENT_IP_CALLABLE), as DRF's throttles see it.

    An X-Forwarded-For entry that is no address (a misconfigured proxy count lets
    the client's own text through) falls back to the peer's address.
    """
    # get_ident reads only META, which a Django request has as well as DRF's.
    ident = BaseThrottle().get_ident(cast("Request", request))
    try:
        return str(ipaddress.ip_address(ident))
    except ValueError:
        return request.META.get("REMOTE_ADDR")


def _failures(attempts: QuerySet) -> int:
    return attempts.aggregate(total=Sum("failures_since_start"))["total"] or 0


class SignInHandler(AxesDatabaseHandler):
    """AXES_HANDLER: axes' database handler with a second, higher limit per address.

    axes compares every group of AXES_LOCKOUT_PARAMETERS with one AXES_FAILURE_LIMIT.
    The settings list two groups, [["username", "ip_address"], "ip_address"]; this
    handler holds the first to AXES_FAILURE_LIMIT and the second to
    LOGIN_ADDRESS_FAILURE_LIMIT. An address over its ceiling is reported to axes as
    failures at its one limit, so axes locks it the way it locks a username.
    """

    def failures_by_group(
        self, request: HttpRequest, credentials: dict[str, Any] | None = None
    ) -> tuple[int, int]:
        """Failures within the cool-off: for this username from this address, and from
        this address under any username."""
        per_username, per_address = self.get_user_attempts(request, credentials)
        return _failures(per_username), _failures(per_address)

    def address_locked(
        self, request: HttpRequest, credentials: dict[str, Any] | None = None
    ) -> bool:
        return (
            self.failures_by_group(request, credentials)[1] >= settings.LOGIN_ADDRESS_FAILURE_LIMIT
        )

    def get_failures(self, request: HttpRequest, credentials: dict[str, Any] | None = None) -> int:
        per_username, per_address = self.failures_by_group(request, credentials)
        if per_address >= settings.LOGIN_ADDRESS_FAILURE_LIMIT:
            return max(per_username, get_failure_limit(request, credentials))
        return per_username

    def reset_user_attempts(
        self, request: HttpRequest, credentials: dict[str, Any] | None = None
    ) -> int:
        """After a success, forget that username's failures at the address, not the
        address's others: signing in to an account of one's own must not reset the
        count of guesses at everyone else's."""
        per_username = self.filter_user_attempts(request, credentials)[0]
        count, _ = per_username.delete()
        return count


def _in_words(delta: dt.timedelta) -> str:
    """ "15 min", "1 h 30 min", "2 h": whole minutes, at least one."""
    return in_words(dt.timedelta(minutes=max(1, round(delta.total_seconds() / 60))))


def lockout_response(
    request: HttpRequest,
    original_response: HttpResponse | None = None,
    credentials: dict[str, Any] | None = None,
) -> HttpResponse:
    """AXES_LOCKOUT_CALLABLE: the lockout page, 429 with Retry-After.

    Each attempt during a lockout starts the cool-off again (axes' default), so
    the lock lifts one cool-off after this very attempt.
    """
    cool_off = get_cool_off(request)
    by_address = SignInHandler().address_locked(request, credentials)
    context = {
        "by_address": by_address,
        "failure_limit": (
            settings.LOGIN_ADDRESS_FAILURE_LIMIT
            if by_address
            else get_failure_limit(request, credentials)
        ),
        "username": (credentials or {}).get("username", ""),
        "retry_at": timezone.now() + cool_off if cool_off else None,
        "cool_off": _in_words(cool_off) if cool_off else "",
    }
    response = render(request, "registration/lockout.html", context, status=429)
    if cool_off:
        response["Retry-After"] = str(int(cool_off.total_seconds()))
    return response


class WrongTokenThrottle(SimpleRateThrottle):
    """Wrong API tokens per client address (rate "wrong_token"), counted by
    `TokenAuthentication` only when a token is refused."""

    scope = "wrong_token"
    # Set by SimpleRateThrottle.__init__ from the rate (the stubs do not declare them).
    num_requests: int
    duration: int

    def get_cache_key(self, request: Any, view: Any = None) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}

    def exceeded(self, request: Any) -> bool:
        """Whether the address is over the rate; records nothing."""
        self.key = self.get_cache_key(request)
        self.history = self.cache.get(self.key, [])
        self.now = self.timer()
        while self.history and self.history[-1] <= self.now - self.duration:
            self.history.pop()
        return len(self.history) >= self.num_requests

    def record(self) -> None:
        """Count one refused token (after `exceeded`)."""
        self.throttle_success()


class TokenAuthentication(authentication.TokenAuthentication):
    """DRF's `Authorization: Token <key>`, with wrong keys limited per address."""

    def authenticate(self, request: Any) -> Any:
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None  # no token offered: another authenticator, or anonymous
        limit = WrongTokenThrottle()
        if limit.exceeded(request):
            raise exceptions.Throttled(
                wait=limit.wait(), detail="Too many wrong API tokens from this address."
            )
        try:
            return super().authenticate(request)
        except exceptions.AuthenticationFailed:
            limit.record()
            raise
