"""Who may change replay configuration and start work. The verbs enforce these.

Backends, their probes, runs and schedules belong to the service whose revision the
backend serves: its team's model owners manage them, and platform SREs may too (they
replay rollback targets and probe backends during incidents). Sample sets are shared
across teams: any model owner or platform SRE may import one.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied

from ledger.permissions import can_edit_team_objects
from ledger.roles import Role, has_role


def can_manage_backend(user, revision) -> bool:
    """``revision`` is the one the backend serves (or will serve)."""
    if user is None or not user.is_authenticated:
        return False
    if user.is_superuser or has_role(user, Role.PLATFORM_SRE):
        return True
    return can_edit_team_objects(user, revision.service.team)


def can_manage_sample_sets(user) -> bool:
    if user is None or not user.is_authenticated:
        return False
    return (
        user.is_superuser or has_role(user, Role.MODEL_OWNER) or has_role(user, Role.PLATFORM_SRE)
    )


def ensure_can_manage_backend(actor, revision) -> None:
    """actor None is the system itself (tasks, commands, `manage.py apply`)."""
    if actor is not None and not can_manage_backend(actor, revision):
        raise PermissionDenied(
            f"Only model owners of team {revision.service.team.slug!r} or platform SREs "
            "can change this backend or replay against it."
        )


def ensure_can_manage_sample_sets(actor) -> None:
    if actor is not None and not can_manage_sample_sets(actor):
        raise PermissionDenied("Only model owners and platform SREs can import sample sets.")
