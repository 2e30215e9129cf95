"""Who may change what in the registry. The domain layer enforces these."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied

from ledger.roles import Role, has_role


def can_edit_team_objects(user, team) -> bool:
    """Model owners edit the services, assets and runtimes of their own teams."""
    if user is None or not user.is_authenticated:
        return False
    if user.is_superuser:
        return True
    return has_role(user, Role.MODEL_OWNER) and team.members.filter(pk=user.pk).exists()


def can_create_in_any_team(user) -> bool:
    return user.is_authenticated and (user.is_superuser or has_role(user, Role.MODEL_OWNER))


def can_approve_licenses(user) -> bool:
    return user.is_authenticated and (user.is_superuser or has_role(user, Role.SECURITY_COMPLIANCE))


def ensure_can_edit(actor, team) -> None:
    """actor None is the system itself (migrations of data, `manage.py apply`)."""
    if actor is not None and not can_edit_team_objects(actor, team):
        raise PermissionDenied(f"Only model owners of team {team.slug!r} can change this.")


def ensure_can_approve_licenses(actor) -> None:
    if actor is not None and not can_approve_licenses(actor):
        raise PermissionDenied("Only security & compliance can approve or reject a license.")
