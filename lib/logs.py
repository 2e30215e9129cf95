"""Structured logs: one JSON object per line on stdout, each carrying the request id
and the user id of the request (or task) it was written for.

- `RequestContextMiddleware` takes the request id from `X-Request-ID` when a proxy
  set one of the expected shape (`REQUEST_ID_SHAPE`), makes one otherwise, returns
  it in the response's `X-Request-ID`, and writes one access line per request. That
  line names the route pattern and the view, never the path itself: a path can hold
  a credential (a password-reset link holds its token).
- `ContextFilter` (on the handler, see LOGGING in config/settings.py) adds
  `request_id` and `user_id` to every record.
- `on_before_task_publish` / `on_task_prerun` / `on_task_postrun` (connected in
  config/celery.py) carry the request id to the Celery tasks a request enqueues, in
  the message headers, so that the worker's lines for the task carry it too.

python-json-logger formats the records; LOG_FORMAT=console keeps plain lines for
development.
"""

from __future__ import annotations

import contextvars
import logging
import re
import time
import uuid
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.utils.functional import SimpleLazyObject, empty
from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonFormatter as _JsonFormatter

REQUEST_ID_HEADER = "X-Request-ID"
TASK_HEADER = "ledger_request_id"
# What a proxy's id may look like: a UUID, or any token of 8 to 64 letters, digits
# and ._:- (nginx's $request_id is 32 hex). Anything else is replaced, not logged:
# a header is the client's text.
REQUEST_ID_SHAPE = re.compile(r"[A-Za-z0-9._:-]{8,64}")

_request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "ledger_request_id", default=None
)
_request: contextvars.ContextVar[HttpRequest | None] = contextvars.ContextVar(
    "ledger_request", default=None
)

access_log = logging.getLogger("ledger.access")


def current_request_id() -> str | None:
    return _request_id.get()


def new_request_id() -> str:
    return uuid.uuid4().hex


def accepted_request_id(value: str | None) -> str:
    """The proxy's id when it has the expected shape, a new one otherwise."""
    if value and REQUEST_ID_SHAPE.fullmatch(value):
        return value
    return new_request_id()


def _user_id(request: HttpRequest | None) -> int | None:
    """The signed-in user's id, without loading a user nobody asked for yet.

    AuthenticationMiddleware leaves a lazy object; DRF replaces it with the user its
    authenticator found (a token's owner). Evaluating a lazy one here would run a
    query from inside a log call.
    """
    if request is None:
        return None
    user = request.__dict__.get("user")
    if isinstance(user, SimpleLazyObject):
        user = user._wrapped  # type: ignore[attr-defined]
        if user is empty:
            return None
    if user is None or not getattr(user, "is_authenticated", False):
        return None
    return getattr(user, "pk", None)


class ContextFilter(logging.Filter):
    """Adds `request_id` and `user_id` (None outside a request or task) to every record."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = _request_id.get()
        if not hasattr(record, "user_id"):
            record.user_id = _user_id(_request.get())
        return True


class JsonFormatter(_JsonFormatter):
    """python-json-logger's formatter, leaving out Django's `request` extra: its text
    is the full path with the query string (django.request and django.security set it)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("reserved_attrs", [*RESERVED_ATTRS, "request"])
        kwargs.setdefault("timestamp", True)
        kwargs.setdefault("json_ensure_ascii", False)
        super().__init__(*args, **kwargs)


def _route(request: HttpRequest) -> tuple[str, str]:
    match = request.resolver_match
    if match is None:
        return "", ""
    return match.route, match.view_name


class RequestContextMiddleware:
    """Sets the request id for the request's logs and tasks, returns it, logs one access line.

    First in MIDDLEWARE, so that every other middleware's lines carry the id.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request_id = accepted_request_id(request.headers.get(REQUEST_ID_HEADER))
        request.request_id = request_id  # type: ignore[attr-defined]
        id_token = _request_id.set(request_id)
        request_token = _request.set(request)
        started = time.perf_counter()
        try:
            response = self.get_response(request)
            response[REQUEST_ID_HEADER] = request_id
            route, view = _route(request)
            access_log.info(
                "%s %s %s",
                request.method,
                view or route or "(no route)",
                response.status_code,
                extra={
                    "method": request.method,
                    "route": route,
                    "view": view,
                    "status": response.status_code,
                    "duration_ms": round((time.perf_counter() - started) * 1000, 1),
                },
            )
            return response
        finally:
            _request.reset(request_token)
            _request_id.reset(id_token)


# -- Celery: the enqueuing request's id travels in the task's message headers ------------


def on_before_task_publish(headers: dict[str, Any] | None = None, **kwargs: Any) -> None:
    request_id = _request_id.get()
    if headers is not None and request_id and TASK_HEADER not in headers:
        headers[TASK_HEADER] = request_id


_task_tokens: dict[str, contextvars.Token[str | None]] = {}


def on_task_prerun(task_id: str | None = None, task: Any = None, **kwargs: Any) -> None:
    """The task's lines carry the id of the request that enqueued it, or a new one
    (beat's tasks, tasks a command queued): never the previous task's."""
    carried = getattr(task.request, TASK_HEADER, None) if task is not None else None
    request_id = carried if isinstance(carried, str) else None
    token = _request_id.set(accepted_request_id(request_id))
    if task_id:
        _task_tokens[task_id] = token


def on_task_postrun(task_id: str | None = None, **kwargs: Any) -> None:
    token = _task_tokens.pop(task_id or "", None)
    if token is not None:
        _request_id.reset(token)
    else:
        _request_id.set(None)
