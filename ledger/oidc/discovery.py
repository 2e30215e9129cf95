"""The identity provider's configuration, from its discovery document.

Read on first use, not at start-up: the ledger must start (and its break-glass sign-in
work) while the provider is down. A failed read is not kept, so the next sign-in tries
again; a good one is kept for the life of the process.
"""

from __future__ import annotations

import logging
from typing import Any

import requests
from django.conf import settings

logger = logging.getLogger(__name__)

REQUIRED = ("issuer", "authorization_endpoint", "token_endpoint", "jwks_uri", "userinfo_endpoint")

_documents: dict[str, dict[str, Any]] = {}


class ProviderUnavailable(Exception):
    """The provider's discovery document could not be read, or is not one."""


def enabled() -> bool:
    return bool(settings.OIDC_ISSUER)


def discovery_url(issuer: str) -> str:
    return issuer.rstrip("/") + "/.well-known/openid-configuration"


def provider_configuration() -> dict[str, Any]:
    """The discovery document of OIDC_ISSUER, or ProviderUnavailable saying why not."""
    issuer = settings.OIDC_ISSUER
    document = _documents.get(issuer)
    if document is not None:
        return document
    url = discovery_url(issuer)
    try:
        response = requests.get(url, timeout=settings.OIDC_TIMEOUT_SECONDS)
        response.raise_for_status()
        document = response.json()
    except (requests.RequestException, ValueError) as error:
        logger.warning("oidc discovery failed: %s: %s", url, error)
        raise ProviderUnavailable(f"{url}: {type(error).__name__}") from error
    if not isinstance(document, dict):
        raise ProviderUnavailable(f"{url}: not a JSON object")
    missing = [key for key in REQUIRED if not document.get(key)]
    if missing:
        logger.warning("oidc discovery at %s lacks %s", url, ", ".join(missing))
        raise ProviderUnavailable(f"{url}: lacks {', '.join(missing)}")
    # OpenID Connect Discovery 1.0 §4.3: the issuer it states must be the one asked.
    if document["issuer"] != issuer:
        logger.warning(
            "oidc discovery at %s states issuer %r, not OIDC_ISSUER %r",
            url,
            document["issuer"],
            issuer,
        )
        raise ProviderUnavailable(f"{url}: states another issuer")
    _documents[issuer] = document
    return document


def cached_configuration() -> dict[str, Any] | None:
    """The document if it has been read already (sign-out never waits on a down provider)."""
    return _documents.get(settings.OIDC_ISSUER)


def forget() -> None:
    """Drop what was read (tests; a provider that moved its endpoints)."""
    _documents.clear()
