"""`post_only`: require_POST that explains itself to someone who opened the address.

A GET on an action's address (a bookmarked or pasted link, a reload after the
button) gets the 405 page in the site's layout, saying what the address does and
linking to the page its button is on, instead of a blank "405".

    @post_only("queues a replay of a sample set against this backend",
               page="replay:backend_detail")
    def backend_run(request, name): ...

`page` is a URL name reversed with the view's own URL arguments, or a function
of them returning a URL (for when the page takes other arguments).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import TYPE_CHECKING, Any

from django.http import HttpRequest, HttpResponse
from django.urls import NoReverseMatch, reverse
from django.utils.log import log_response

from lib.errors import method_not_allowed

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise

PageOf = str | Callable[..., str] | None


def post_only(action: StrOrPromise, *, page: PageOf = None) -> Callable:
    def decorator(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @wraps(view)
        def inner(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if request.method == "POST":
                return view(request, *args, **kwargs)
            response = method_not_allowed(
                request, ["POST"], action=action, page=_page_url(page, kwargs)
            )
            log_response(
                "Method Not Allowed (%s): %s",
                request.method,
                request.path,
                response=response,
                request=request,
            )
            return response

        return inner

    return decorator


def _page_url(page: PageOf, kwargs: dict[str, Any]) -> str | None:
    if page is None:
        return None
    if callable(page):
        return page(**kwargs)
    try:
        return reverse(page, kwargs=kwargs)
    except NoReverseMatch:
        return reverse(page)
