"""Backends: an OpenAI-compatible endpoint bound to the revision it serves.

The credential is never stored: a backend names the environment variable that holds
it on the workers (`credential_env`, in the LEDGER_BACKEND_KEY_* namespace of
`replay.outbound`), and `backend_config` reads it at request time. Only the
variable's name appears in rows, events, pages and exports. The base URL must be
a destination replay.outbound allows; moving a backend to another base URL
drops its credential unless the same change names it again.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.translation import gettext as _

from ledger.chain import append_event
from ledger.services import snapshot
from lib.actors import Actor
from lib.env import env_str
from replay import outbound
from replay.client import BackendConfig, Timeouts
from replay.models import Backend
from replay.permissions import ensure_can_manage_backend

_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
FIELDS = Backend.STATED_FIELDS
# Names people reach for when they mean to paste a key: refused with advice.
_SECRET_FIELDS = ("credential", "api_key", "key", "token", "password", "secret")


class CredentialMissing(Exception):
    """The backend's credential variable is not set where the work runs, or is not one a
    backend may name."""


def _check_fields(fields: dict[str, Any]) -> None:
    secret = [name for name in fields if name in _SECRET_FIELDS]
    if secret:
        raise ValidationError(
            {
                name: _(
                    "The key itself is never stored. Put it in an environment variable on "
                    "the workers and give that variable's name in credential_env."
                )
                for name in secret
            }
        )
    unknown = sorted(set(fields) - set(FIELDS))
    if unknown:
        raise ValidationError({name: _("This field cannot be set here.") for name in unknown})
    env = fields.get("credential_env")
    if env and not _ENV_NAME.match(env):
        raise ValidationError(
            {
                "credential_env": _(
                    "Give the NAME of an environment variable (capital letters, digits and _, "
                    "e.g. %(example)s), never the key itself."
                )
                % {"example": f"{outbound.CREDENTIAL_PREFIX}KB_ASSISTANT"}
            }
        )
    if env and (problem := outbound.credential_problem(env)):
        raise ValidationError({"credential_env": problem}, code="credential_refused")
    url = fields.get("base_url")
    if url:
        parts = urlsplit(url)
        if parts.username or parts.password:
            raise ValidationError(
                {
                    "base_url": _(
                        "The URL must not carry a user or password; name an "
                        "environment variable holding the key in credential_env instead."
                    )
                }
            )
        if parts.query or parts.fragment:
            raise ValidationError(
                {
                    "base_url": _(
                        "Give the root of the API without a query string, e.g. http://10.0.0.5:8000"
                    )
                }
            )
        outbound.check_base_url(url)


def _view(backend: Backend) -> dict[str, Any]:
    return snapshot(backend, FIELDS)


@transaction.atomic
def create_backend(*, actor: Actor, **fields: Any) -> Backend:
    """Register an endpoint serving ``revision``; appends ``replay.backend_created``."""
    _check_fields(fields)
    revision = fields.get("revision")
    if revision is None:
        raise ValidationError({"revision": _("Name the revision this backend serves.")})
    ensure_can_manage_backend(actor, revision)
    backend = Backend(**fields)
    backend.full_clean()
    backend.save(force_insert=True)
    append_event(
        actor=actor,
        action="replay.backend_created",
        subject=backend,
        payload={"after": _view(backend)},
    )
    return backend


@transaction.atomic
def update_backend(backend: Backend, *, actor: Actor, **changes: Any) -> bool:
    """Change a backend; False (and no event) when nothing changed.

    Pointing a backend at another revision is allowed (the endpoint was redeployed);
    both revisions' owners must be allowed to manage it.
    """
    _check_fields(changes)
    backend = (
        Backend.objects.select_for_update()
        .select_related("revision__service__team")
        .get(pk=backend.pk)
    )
    moved = "base_url" in changes and changes["base_url"] != backend.base_url
    if moved and "credential_env" not in changes:
        # A key meant for one address is never sent to another unless someone says so.
        changes = {**changes, "credential_env": ""}
    ensure_can_manage_backend(actor, backend.revision)
    if "revision" in changes and changes["revision"] != backend.revision:
        ensure_can_manage_backend(actor, changes["revision"])
    before = _view(backend)
    for name, value in changes.items():
        setattr(backend, name, value)
    after = _view(backend)
    changed = [name for name in FIELDS if before[name] != after[name]]
    if not changed:
        return False
    backend.full_clean()
    backend.save(update_fields=[*changed, "updated_at"])
    payload: dict[str, Any] = {
        "before": {name: before[name] for name in changed},
        "after": {name: after[name] for name in changed},
    }
    if moved and before["credential_env"] and not after["credential_env"]:
        payload["credential_cleared"] = (
            f"base_url changed without the credential, so {before['credential_env']} "
            "is no longer sent"
        )
    append_event(actor=actor, action="replay.backend_updated", subject=backend, payload=payload)
    return True


def backend_config(backend: Backend, *, concurrency: int | None = None) -> BackendConfig:
    """What the client needs to reach the backend, with the key read from the environment.

    ``<NAME>_FILE`` works too (a Docker or Kubernetes secret file). Raises
    CredentialMissing, naming the variable and never a value, when it is not set.
    """
    credential = None
    if backend.credential_env:
        # Rows saved before the namespace existed are refused here too.
        if problem := outbound.credential_problem(backend.credential_env):
            raise CredentialMissing(problem)
        credential = env_str(backend.credential_env) or None
        if credential is None:
            raise CredentialMissing(
                f"the credential variable {backend.credential_env} (or "
                f"{backend.credential_env}_FILE) is not set on this worker"
            )
    return BackendConfig(
        base_url=backend.base_url,
        model=backend.model_name,
        credential=credential,
        concurrency=min(concurrency or backend.concurrency_limit, backend.concurrency_limit),
        timeouts=Timeouts(
            connect=backend.connect_timeout_s,
            first_token=backend.first_token_timeout_s,
            idle=backend.idle_timeout_s,
            total=backend.total_timeout_s,
        ),
    )
