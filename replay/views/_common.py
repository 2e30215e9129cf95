"""What the replay pages share: fetching a backend for reading or for a change, and who may.

The rules themselves live in `replay.services.access` (the verbs enforce them); the
pages ask the same questions first, to offer only the buttons that will work and to
answer 403 before any work is done.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest
from django.shortcuts import get_object_or_404

from ledger.models import Revision
from ledger.roles import Role, has_role
from ledger.views._common import editable_teams
from replay import services
from replay.models import Backend


def can_operate(user, backend: Backend) -> bool:
    """Edit, run, probe and schedule it: the service team's model owners and platform SREs."""
    return services.can_manage_backend(user, backend.revision)


def backend_for(request: HttpRequest, name: str, *, write: bool = False) -> Backend:
    """The backend with its revision, service and team; 404 if unknown, 403 if `write` is refused."""
    backend = get_object_or_404(
        Backend.objects.select_related(
            "revision__service__team", "revision__model_asset", "revision__runtime"
        ),
        name=name,
    )
    if write and not can_operate(request.user, backend):
        team = backend.revision.service.team
        raise PermissionDenied(
            f"Only model owners of team {team.slug!r} and platform SREs can change, run or "
            f"probe backend {backend.name}."
        )
    return backend


def can_register_backends(user) -> bool:
    return user.is_authenticated and (
        user.is_superuser or has_role(user, Role.PLATFORM_SRE) or editable_teams(user).exists()
    )


def revisions_for(user) -> QuerySet[Revision]:
    """The revisions this person may point a backend at."""
    revisions = Revision.objects.select_related("service").order_by("service__slug", "-number")
    if user.is_superuser or has_role(user, Role.PLATFORM_SRE):
        return revisions
    return revisions.filter(service__team__in=editable_teams(user))
