"""System checks of the ledger's own settings (`manage.py check --deploy`)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Tags, Warning, register


@register(Tags.security, deploy=True)
def signing_key_configured(app_configs: Any, **kwargs: Any) -> list[Warning]:
    if settings.LEDGER_SIGNING_KEY:
        return []
    return [
        Warning(
            "LEDGER_SIGNING_KEY is not set: checkpoints and exports are signed with a key "
            f"generated into {settings.LEDGER_SIGNING_KEY_PATH}, which each machine makes "
            "for itself and a lost disk loses.",
            hint="Generate one with `openssl genpkey -algorithm ed25519` and set "
            "LEDGER_SIGNING_KEY or LEDGER_SIGNING_KEY_FILE on every web and worker process.",
            id="ledger.W001",
        )
    ]
