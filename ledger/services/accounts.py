"""Who may do what: roles (Django groups, ledger/roles.py) and API tokens.

A role decides who may sign off a release or approve a license, and a token is a
pipeline's key to the API: granting either is a decision the ledger records, as
an event naming who granted what to whom. Token events name the key's first
characters, never the key.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable

from django.conf import settings
from django.contrib.auth.models import Group, User
from django.db import transaction
from rest_framework.authtoken.models import Token

from ledger.chain import append_event, canonical_json
from ledger.models import Event, Team
from ledger.models.contacts import Contact, validate_phone
from ledger.permissions import ensure_can_manage_accounts
from ledger.roles import Role
from lib.actors import Actor
from lib.group_map import grants_for

logger = logging.getLogger(__name__)

__all__ = [
    "TOKEN_PREFIX_LENGTH",
    "apply_provider_groups",
    "issue_api_token",
    "provider_source",
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
    user: User, roles: Iterable[Role | str], *, actor: Actor, source: str = ""
) -> tuple[list[str], list[str]]:
    """Give the user exactly these roles; other groups are left as they are.

    `source`: what decided it when not a person (the identity provider), in the event.
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
    payload: dict[str, object] = {"added": added, "removed": removed, "roles": sorted(wanted)}
    if source:
        payload["source"] = source
    append_event(
        actor=actor,
        action="account.roles_changed",
        subject=user,
        subject_label=user.get_username(),
        payload=payload,
    )
    # roles_of caches on the object: the caller's copy must not answer the old roles.
    for cached in ("_ledger_roles", "_ledger_permissions"):
        user.__dict__.pop(cached, None)
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
def revoke_api_token(user: User, *, actor: Actor, source: str = "") -> bool:
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
        payload={"prefix": prefix, **({"source": source} if source else {})},
    )
    return True


def provider_source() -> str:
    """How events changed by a sign-in name the identity provider."""
    return f"oidc: {settings.OIDC_PROVIDER_NAME} ({settings.OIDC_ISSUER})"


GROUP_MAP_ACTION = "account.group_map_applied"


def record_group_map(source: str) -> bool:
    """Record OIDC_GROUP_MAP in the chain when it differs from the map last recorded:
    the map lives in settings, so it changes with a deployment, and the first sign-in
    under a new one says so before any role follows it. True when recorded."""
    document = json.loads(canonical_json(settings.OIDC_GROUP_MAP))
    digest = hashlib.sha256(canonical_json(document).encode()).hexdigest()
    text = (
        Event.objects.filter(
            subject_type="settings", subject_id="OIDC_GROUP_MAP", action=GROUP_MAP_ACTION
        )
        .order_by("-sequence")
        .values_list("payload", flat=True)
        .first()
    )
    last = json.loads(text) if text else None
    if isinstance(last, dict) and last.get("sha256") == digest:
        return False
    append_event(
        actor=None,
        action=GROUP_MAP_ACTION,
        subject=("settings", "OIDC_GROUP_MAP"),
        payload={
            "before": last.get("map") if isinstance(last, dict) else None,
            "map": document,
            "sha256": digest,
            "source": source,
        },
    )
    return True


@transaction.atomic
def apply_provider_groups(user: User, groups: list[str]) -> None:
    """Make the person's roles and teams what their identity-provider groups give
    (OIDC_GROUP_MAP), at each sign-in: the provider decides, so roles and teams it does
    not give are taken away. Each change is an event whose actor is the system and whose
    source names the provider. A person left with no role loses their API token: a
    token's rights are its person's, and a person the company took out of every mapped
    group has none left to lend it.
    """
    from ledger.services.registry import add_team_member, remove_team_member

    source = provider_source()
    record_group_map(source)
    roles, team_slugs = grants_for(groups, settings.OIDC_GROUP_MAP)
    unknown = sorted(roles - set(Role.values))
    if unknown:
        # The system check (ledger.checks) names these at start-up too.
        logger.warning("OIDC_GROUP_MAP names roles the ledger does not have: %s", unknown)
    set_roles(user, sorted(roles & set(Role.values)), actor=None, source=source)
    wanted = {team.slug: team for team in Team.objects.filter(slug__in=team_slugs)}
    missing = sorted(set(team_slugs) - set(wanted))
    if missing:
        logger.warning("OIDC_GROUP_MAP names teams the ledger does not have: %s", missing)
    held = {team.slug: team for team in user.teams.all()}
    for slug in sorted(set(wanted) - set(held)):
        add_team_member(wanted[slug], user, actor=None, source=source)
    for slug in sorted(set(held) - set(wanted)):
        remove_team_member(held[slug], user, actor=None, source=source)
    if not roles & set(Role.values):
        revoke_api_token(user, actor=None, source=source)
