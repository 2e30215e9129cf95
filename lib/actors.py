"""Who acts and who asks: a verb's ``actor`` is a user, or None for the system (commands, tasks)."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias, cast

from django.http import HttpRequest

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser, User

# The keyword-only `actor` of every domain verb and `ensure_*` permission.
Actor: TypeAlias = "User | None"

# The `user` a `can_*` permission or a page asks about: signed in or not, or the system.
Requester: TypeAlias = "User | AnonymousUser | None"


class AuthenticatedHttpRequest(HttpRequest):
    """The request of a view behind ``login_required``: its user is signed in.

    Only for annotations (django-stubs' recommended way to say so); Django still
    passes a plain HttpRequest.
    """

    user: User


def admin_actor(request: HttpRequest) -> User:
    """Who acts through the admin site, which lets only signed-in, active staff in."""
    return cast("User", request.user)
