"""System checks of the ledger's own settings (`manage.py check --deploy`)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register
from django.core.exceptions import ImproperlyConfigured


@register(Tags.security, deploy=True)
def signing_key_configured(app_configs: Any, **kwargs: Any) -> list[Warning]:
    if settings.LEDGER_SIGNING_KEY:
        return []
    return [
        Warning(
            "LEDGER_SIGNING_KEY is not set: events, checkpoints and exports are signed with "
            f"a key generated into {settings.LEDGER_SIGNING_KEY_PATH}, which each machine "
            "makes for itself (the events one machine signs then fail verification on "
            "another) and a lost disk loses.",
            hint="Generate one with `openssl genpkey -algorithm ed25519` and set "
            "LEDGER_SIGNING_KEY or LEDGER_SIGNING_KEY_FILE on every web and worker process "
            "and on `migrate`.",
            id="ledger.W001",
        )
    ]


@register(Tags.security)
def retired_keys_readable(app_configs: Any, **kwargs: Any) -> list[Error]:
    """LEDGER_RETIRED_PUBLIC_KEYS is read when an event is verified: a typo would
    otherwise surface as every old event "signed by an unknown key"."""
    from ledger import signing

    try:
        signing.retired_public_keys()
    except ImproperlyConfigured as error:
        return [Error(str(error), id="ledger.E001")]
    return []


@register()
def group_map_roles_exist(app_configs: Any, **kwargs: Any) -> list[Error]:
    """OIDC_GROUP_MAP is read before the apps load, so its role names are checked here."""
    from ledger.roles import Role

    unknown = sorted(
        {role for grant in settings.OIDC_GROUP_MAP.values() for role in grant["roles"]}
        - set(Role.values)
    )
    if not unknown:
        return []
    return [
        Error(
            f"OIDC_GROUP_MAP names roles the ledger does not have: {', '.join(unknown)}.",
            hint=f"Roles are: {', '.join(Role.values)}.",
            id="ledger.E002",
        )
    ]
