"""Who may change replay configuration and start work: one function per rule.

Backends, their probes, runs and schedules belong to the service whose revision the
backend serves: its team's model owners manage them, and platform SREs may too (they
replay rollback targets and probe backends during incidents). Sample sets are shared
across teams: any model owner or platform SRE may import one. Pages, the API and the
verbs ask the same functions; `actor=None` is the system (tasks, commands).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeGuard

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.utils.translation import gettext as _

from ledger.models import Revision
from ledger.permissions import can_edit_team_objects, editable_teams
from ledger.roles import Role, has_role
from lib.actors import Actor, Requester

if TYPE_CHECKING:
    from django.contrib.auth.models import User


def _signed_in(user: Requester) -> TypeGuard[User]:
    return user is not None and user.is_authenticated


def _operates_everything(user: User) -> bool:
    return user.is_superuser or has_role(user, Role.PLATFORM_SRE)


def can_manage_backend(user: Requester, revision: Revision) -> bool:
    """``revision`` is the one the backend serves (or will serve)."""
    if not _signed_in(user):
        return False
    return _operates_everything(user) or can_edit_team_objects(user, revision.service.team)


def can_register_backends(user: Requester) -> bool:
    """Register a new backend for at least one revision."""
    return _signed_in(user) and (_operates_everything(user) or editable_teams(user).exists())


def manageable_revisions(user: Requester) -> QuerySet[Revision]:
    """The revisions this person may point a backend at."""
    revisions = Revision.objects.select_related("service").order_by("service__slug", "-number")
    if _signed_in(user) and _operates_everything(user):
        return revisions
    return revisions.filter(service__team__in=editable_teams(user))


def can_manage_sample_sets(user: Requester) -> bool:
    if not _signed_in(user):
        return False
    return _operates_everything(user) or has_role(user, Role.MODEL_OWNER)


def ensure_can_manage_backend(actor: Actor, revision: Revision) -> None:
    if actor is not None and not can_manage_backend(actor, revision):
        raise PermissionDenied(
            _(
                "Only model owners of team %(team)s or platform SREs "
                "can change this backend or replay against it."
            )
            % {"team": repr(revision.service.team.slug)}
        )


def ensure_can_manage_sample_sets(actor: Actor) -> None:
    if actor is not None and not can_manage_sample_sets(actor):
        raise PermissionDenied(_("Only model owners and platform SREs can import sample sets."))
