"""What the replay pages share: fetching a backend for reading or for a change.

The rules live in `replay.permissions` (the verbs enforce them too); the pages
ask them first, to offer only the buttons that will work and to answer 403
before any work is done.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404
from django.utils.translation import gettext as _

from lib.actors import AuthenticatedHttpRequest
from replay.models import Backend
from replay.permissions import can_manage_backend


def backend_for(request: AuthenticatedHttpRequest, name: str, *, write: bool = False) -> Backend:
    """The backend with its revision, service and team; 404 if unknown, 403 if `write` is refused."""
    backend = get_object_or_404(
        Backend.objects.select_related(
            "revision__service__team", "revision__model_asset", "revision__runtime"
        ),
        name=name,
    )
    if write and not can_manage_backend(request.user, backend.revision):
        team = backend.revision.service.team
        raise PermissionDenied(
            _(
                "Only model owners of team %(team)s and platform SREs can change, run or "
                "probe backend %(backend)s."
            )
            % {"team": repr(team.slug), "backend": backend.name}
        )
    return backend
