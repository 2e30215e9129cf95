"""OIDC_GROUP_MAP: which of the ledger's roles and teams each identity-provider group gives.

A JSON object read by the settings, before any app is loaded: its shape is checked here,
its role names by a system check (`ledger.checks`) and its team slugs at each sign-in.

    {"ledger-sre": {"roles": ["platform_sre"], "teams": ["platform"]},
     "kb-team": {"roles": ["model_owner"], "teams": ["kb-team"]}}
"""

from __future__ import annotations

import json
from typing import TypedDict
from urllib.parse import urlsplit


class GroupGrant(TypedDict):
    roles: list[str]
    teams: list[str]


def parse_group_map(raw: str) -> dict[str, GroupGrant]:
    """The map, or ValueError naming what is wrong with it."""
    try:
        data = json.loads(raw or "{}")
    except json.JSONDecodeError as error:
        raise ValueError(f"not JSON ({error})") from error
    if not isinstance(data, dict):
        raise ValueError(
            'must be a JSON object: {"provider group": {"roles": [...], "teams": [...]}}'
        )
    parsed: dict[str, GroupGrant] = {}
    for group, grant in data.items():
        if not isinstance(grant, dict) or set(grant) - {"roles", "teams"}:
            raise ValueError(f'group {group!r}: give an object with "roles" and/or "teams"')
        lists: dict[str, list[str]] = {}
        for key in ("roles", "teams"):
            value = grant.get(key, [])
            if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
                raise ValueError(f"group {group!r}: {key} must be a list of names")
            lists[key] = value
        parsed[group] = GroupGrant(roles=lists["roles"], teams=lists["teams"])
    return parsed


def provider_origin(issuer: str) -> str:
    """scheme://host[:port] of the provider's issuer (for the CSP's form-action)."""
    parts = urlsplit(issuer)
    return f"{parts.scheme}://{parts.netloc}"


def grants_for(groups: list[str], group_map: dict[str, GroupGrant]) -> tuple[set[str], set[str]]:
    """The roles and team slugs the groups give together."""
    roles: set[str] = set()
    teams: set[str] = set()
    for group in groups:
        grant = group_map.get(group)
        if grant:
            roles.update(grant["roles"])
            teams.update(grant["teams"])
    return roles, teams
