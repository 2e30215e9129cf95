"""Who may do what: roles (Django groups, ledger/roles.py) and API tokens.

A role decides who may sign off a release or approve a license, and a token is a
pipeline's key to the API: granting either is a decision the ledger records, as
an event naming who granted what to whom. Token events name the key's first
characters, never the key.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.contrib.auth.models import Group, User
from django.db import transaction
from rest_framework.authtoken.models import Token

from ledger.chain import append_event
from ledger.models.contacts import Contact, validate_phone
from ledger.permissions import ensure_can_manage_accounts
from ledger.roles import Role
from lib.actors import Actor

__all__ = [
    "TOKEN_PREFIX_LENGTH",
    "issue_api_token",
    "revoke_api_token",
    "set_phone",
    "set_roles",
    "token_prefix",
]

TOKEN_PREFIX_LENGTH = 6


def token_prefix(key: str) -> str:
    return f"{key[:TOKEN_PREFIX_LENGTH]}…"


@transaction.atomic
def set_roles(
    user: User, roles: Iterable[Role | str], *, actor: Actor
) -> tuple[list[str], list[str]]:
    """Give the user exactly these roles; other groups are left as they are.

    Returns (added, removed) role names; nothing is recorded when neither has any.
    """
    ensure_can_manage_accounts(actor)
    wanted = {Role(role).value for role in roles}
    held = set(user.groups.filter(name__in=Role.values).values_list("name", flat=True))
    added, removed = sorted(wanted - held), sorted(held - wanted)
    if not added and not removed:
        return [], []
    groups = {group.name: group for group in Group.objects.filter(name__in=added + removed)}
    missing = [name for name in added if name not in groups]
    if missing:
        # The groups are made after every migrate (ledger/apps.py); a missing one is a broken install.
        raise RuntimeError(f"role groups missing: {', '.join(missing)}; run manage.py migrate")
    user.groups.add(*(groups[name] for name in added))
    user.groups.remove(*(groups[name] for name in removed))
    append_event(
        actor=actor,
        action="account.roles_changed",
        subject=user,
        subject_label=user.get_username(),
        payload={"added": added, "removed": removed, "roles": sorted(wanted)},
    )
    return added, removed


def set_phone(user: User, phone: str, *, actor: Actor) -> bool:
    """The person's phone or pager number (blank: none). Returns whether it changed.

    Like the e-mail address beside it, a contact detail and not a decision: no event is
    appended, so that the append-only chain never keeps a personal number."""
    ensure_can_manage_accounts(actor)
    phone = phone.strip()
    validate_phone(phone)
    current = Contact.objects.filter(user=user).values_list("phone", flat=True).first() or ""
    if phone == current:
        return False
    Contact.objects.update_or_create(user=user, defaults={"phone": phone})
    return True


@transaction.atomic
def issue_api_token(user: User, *, actor: Actor) -> str:
    """A new API token for the user, replacing the one it had. Returns the key, to be
    shown once: the ledger keeps it only in the token table, which nothing renders whole."""
    ensure_can_manage_accounts(actor)
    previous = Token.objects.select_for_update().filter(user=user).first()
    replaced = token_prefix(previous.key) if previous else None
    if previous:
        previous.delete()
    token = Token.objects.create(user=user)
    append_event(
        actor=actor,
        action="account.token_issued",
        subject=user,
        subject_label=user.get_username(),
        payload={"prefix": token_prefix(token.key), "replaced": replaced},
    )
    return token.key


@transaction.atomic
def revoke_api_token(user: User, *, actor: Actor) -> bool:
    """Delete the user's API token; False when there was none."""
    ensure_can_manage_accounts(actor)
    token = Token.objects.select_for_update().filter(user=user).first()
    if token is None:
        return False
    prefix = token_prefix(token.key)
    token.delete()
    append_event(
        actor=actor,
        action="account.token_revoked",
        subject=user,
        subject_label=user.get_username(),
        payload={"prefix": prefix},
    )
    return True
