"""Errors under /api/ answer JSON, whoever raised them; pages answer pages.

`UnstorableRequestMiddleware` refuses a NUL in the URL or the query string with a
400 naming the parameter, JSON or HTML alike, before any view, filter or lookup
hands it to PostgreSQL.

Three pieces make errors JSON, because an error can surface in three places:

- `api_exception_handler` (REST_FRAMEWORK["EXCEPTION_HANDLER"]): anything raised
  inside a DRF view. DRF's own handler answers its exceptions, Http404 and
  PermissionDenied; whatever it leaves becomes a JSON 400 (SuspiciousOperation)
  or 500, logged with its traceback.
- `ApiErrorsMiddleware.process_exception`: a plain Django view under /api/, or
  rendering a DRF response after the view returned. Also under DEBUG=True,
  where Django would show its technical page.
- `bad_request`, `permission_denied`, `page_not_found`, `server_error`
  (config/urls.py handler400/403/404/500): what is raised in middleware or by
  the URL resolver, before any view. Django uses them only without DEBUG;
  `NotFoundPageMiddleware` gives `make run` (DEBUG) the same 404 page.

Elsewhere the same handlers render 400/403/404/500.html in the site's layout,
saying why and offering a way back; `MethodNotAllowedPageMiddleware` does the same
for a 405 (a GET on a POST-only address: `lib.http.post_only` says what the address
does and where its button is). lib/log_filters.py logs a refusal as one line.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template import loader
from django.urls import Resolver404
from django.utils.http import url_has_allowed_host_and_scheme
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import exception_handler

from lib.storable import ALLOWED_TEXT, text_problem

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise

log = logging.getLogger("lib.errors")

API_PREFIX = "/api/"
BAD_REQUEST = {"detail": "Bad request."}
PERMISSION_DENIED = {"detail": "Permission denied."}
NOT_FOUND = {"detail": "Not found."}
SERVER_ERROR = {"detail": "Internal server error."}


def is_api(request: HttpRequest) -> bool:
    return request.path_info.startswith(API_PREFIX)


def api_exception_handler(exc: Exception, context: dict) -> Response | None:
    response = exception_handler(exc, context)
    if response is not None:
        return response
    if isinstance(exc, SuspiciousOperation):  # TooManyFieldsSent, RequestDataTooBig, …
        log.warning("suspicious API request: %s", exc)
        return Response(BAD_REQUEST, status=status.HTTP_400_BAD_REQUEST)
    log.error("unhandled error in an API view", exc_info=exc)
    return Response(SERVER_ERROR, status=status.HTTP_500_INTERNAL_SERVER_ERROR)


class UnstorableRequestMiddleware:
    """A 400 for a NUL in the URL path or the query string.

    Pages and the API read query parameters in many places (filters, lookups,
    prefills); none of them can pass a NUL to PostgreSQL. Percent-decoding
    replaces bytes that are not UTF-8, so no surrogate arrives this way.
    """

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        problem = _request_problem(request)
        if problem is None:
            return self.get_response(request)
        name, message = problem
        if is_api(request):
            return JsonResponse({name: [message]}, status=400)
        context = {"problem": message, "back": back_url(request)}
        return render(request, "400.html", context, status=400)


def _request_problem(request: HttpRequest) -> tuple[str, str] | None:
    problem = text_problem(request.path_info)
    if problem:
        return "path", f"{problem}; {ALLOWED_TEXT}."
    for name, values in request.GET.lists():
        for text in (name, *values):
            problem = text_problem(text)
            if problem:
                shown = name if text_problem(name) is None else repr(name)
                return name, f"{shown}: {problem}; {ALLOWED_TEXT}."
    return None


class ApiErrorsMiddleware:
    """A JSON 500 for what escapes a view (or its response's rendering) under /api/."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not is_api(request):
            return None
        if isinstance(exception, SuspiciousOperation):
            log.warning("suspicious API request: %s", exception)
            return JsonResponse(BAD_REQUEST, status=400)
        log.error("unhandled error under %s", API_PREFIX, exc_info=exception)
        return JsonResponse(SERVER_ERROR, status=500)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api(request):
        return JsonResponse(BAD_REQUEST, status=400)
    return render(request, "400.html", {"back": back_url(request)}, status=400)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api(request):
        return JsonResponse(PERMISSION_DENIED, status=403)
    # The permission functions word their refusals for the person refused
    # (ledger/permissions.py): "Only model owners of team 'x' can change this."
    context = {"reason": str(exception), "back": back_url(request)}
    return render(request, "403.html", context, status=403)


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api(request):
        return JsonResponse(NOT_FOUND, status=404)
    context = {"reason": _not_found_reason(exception), "back": back_url(request)}
    return render(request, "404.html", context, status=404)


def server_error(request: HttpRequest) -> HttpResponse:
    if is_api(request):
        return JsonResponse(SERVER_ERROR, status=500)
    # Without the request: its context (the signed-in user, the session) may be
    # what failed. The page is the layout with the brand only.
    return HttpResponse(loader.get_template("500.html").render(), status=500)


def method_not_allowed(
    request: HttpRequest,
    allowed: list[str],
    *,
    action: StrOrPromise = "",
    page: str | None = None,
) -> HttpResponse:
    """The 405 page: what the address is for, and where its button is."""
    context = {
        "method": request.method,
        "allowed": allowed,
        "action": action,
        "page": page,
        "back": back_url(request),
    }
    response = render(request, "405.html", context, status=405)
    response["Allow"] = ", ".join(allowed)
    return response


class MethodNotAllowedPageMiddleware:
    """The 405 page for the bare 405s of `require_POST` and friends (Django's logout
    among them), outside /api/, where DRF answers its own JSON 405."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.status_code != 405 or is_api(request) or response.streaming:
            return response
        if response.content:  # a 405 that explains itself already
            return response
        allowed = [m.strip() for m in response.get("Allow", "").split(",") if m.strip()]
        page = method_not_allowed(request, allowed)
        page._has_been_logged = True  # type: ignore[attr-defined]  # Django logged the bare one
        return page


class NotFoundPageMiddleware:
    """The project's 404 page under DEBUG too (`make run`), where Django would show its
    technical page listing every URL pattern: for an address no pattern matches (the
    resolver's 404 reaches here as a response, no view having matched) and for an
    Http404 a view raised. Without DEBUG, Django already renders handler404."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (
            settings.DEBUG
            and response.status_code == 404
            and getattr(request, "resolver_match", None) is None
        ):
            page = page_not_found(request, Resolver404())
            page._has_been_logged = True  # type: ignore[attr-defined]  # Django logged its own
            return page
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if settings.DEBUG and isinstance(exception, Http404):
            return page_not_found(request, exception)
        return None


def back_url(request: HttpRequest) -> str | None:
    """Where the person came from, if that is a page of this site other than this one."""
    referer = request.headers.get("Referer", "")
    if not referer or not url_has_allowed_host_and_scheme(
        referer, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return None
    parts = urlsplit(referer)
    if parts.path == request.path or parts.path.startswith(API_PREFIX):
        return None
    return referer


def _not_found_reason(exception: Exception) -> str:
    """The Http404's own message when a view wrote one for people; not the resolver's."""
    if isinstance(exception, Resolver404) or not isinstance(exception, Http404):
        return ""
    message = exception.args[0] if exception.args else ""
    # get_object_or_404's "No Service matches the given query." names a model, not the thing.
    if not isinstance(message, str) or message.endswith("matches the given query."):
        return ""
    return message
