"""Who may sign in, and how: passwords (local accounts) and the identity provider.

`LocalPasswordBackend` is Django's ModelBackend while LOCAL_LOGIN is on (the default).
With LOCAL_LOGIN off it accepts one password only: BREAK_GLASS_USERNAME's, and only while
that account is an active superuser — the way in for an administrator when the provider
is down (docs/operations.md, "Break glass").

`ProviderBackend` is mozilla-django-oidc's code-flow backend with the checks it leaves
to its users: the ID token's issuer and audience, the groups claim's shape. Accounts are
matched and created by OIDC_USERNAME_CLAIM, and their roles and teams set from their
groups at every sign-in (`ledger.services.apply_provider_groups`).
"""

from __future__ import annotations

import logging
from typing import Any

import jwt
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import User
from django.core.exceptions import SuspiciousOperation
from django.db import transaction
from django.http import HttpRequest
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from ledger.oidc.discovery import provider_configuration

logger = logging.getLogger(__name__)


class LocalPasswordBackend(ModelBackend):
    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> User | None:
        if settings.LOCAL_LOGIN:
            return super().authenticate(request, username=username, password=password, **kwargs)
        if not settings.BREAK_GLASS_USERNAME or username != settings.BREAK_GLASS_USERNAME:
            if username is not None:
                logger.warning("password sign-in refused: LOCAL_LOGIN is off (user %r)", username)
            return None
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is not None and not user.is_superuser:
            logger.warning("break-glass sign-in refused: %r is not a superuser", username)
            return None
        if user is not None:
            logger.warning("break-glass sign-in by %r", username)
        return user


def refuse(request: HttpRequest | None, reason: str) -> SuspiciousOperation:
    """The refusal to raise, its reason kept on the request for the refusal page."""
    if request is not None:
        request.oidc_refusal = reason  # type: ignore[attr-defined]
    return SuspiciousOperation(reason)


class ProviderBackend(OIDCAuthenticationBackend):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Not the library's __init__: it reads the provider's endpoints, and Django builds
        # this backend on every request of a signed-in person (get_user). They are read
        # from discovery when a sign-in needs them.
        self.UserModel = get_user_model()
        self.OIDC_RP_IDP_SIGN_KEY = None

    @property
    def OIDC_OP_TOKEN_ENDPOINT(self) -> str:
        return str(provider_configuration()["token_endpoint"])

    @property
    def OIDC_OP_USER_ENDPOINT(self) -> str:
        return str(provider_configuration()["userinfo_endpoint"])

    @property
    def OIDC_OP_JWKS_ENDPOINT(self) -> str:
        return str(provider_configuration()["jwks_uri"])

    @property
    def OIDC_RP_CLIENT_ID(self) -> str:
        return str(settings.OIDC_CLIENT_ID)

    @property
    def OIDC_RP_CLIENT_SECRET(self) -> str:
        return str(settings.OIDC_CLIENT_SECRET)

    @property
    def OIDC_RP_SIGN_ALGO(self) -> str:
        return str(settings.OIDC_SIGN_ALGO)

    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> User | None:
        # Only the callback's call (it passes the nonce and the PKCE verifier): a password
        # form posted to a URL that carries ?code=…&state=… must not start a token exchange.
        if not settings.OIDC_ISSUER or "nonce" not in kwargs:
            return None
        return super().authenticate(request, **kwargs)

    def verify_token(self, token: str, **kwargs: Any) -> dict[str, Any]:
        """The library checks the signature (against the provider's keys), the expiry
        and the nonce; the issuer and the audience are checked here."""
        request = getattr(self, "request", None)
        try:
            payload: dict[str, Any] = super().verify_token(token, **kwargs)
        except jwt.InvalidTokenError as error:
            # Expired, not yet valid, malformed: PyJWT's refusals the library lets through.
            raise refuse(request, f"ID token refused: {error}") from error
        issuer = provider_configuration()["issuer"]
        if payload.get("iss") != issuer:
            raise refuse(request, f"ID token issuer {payload.get('iss')!r} is not {issuer!r}")
        audience = payload.get("aud")
        audiences = audience if isinstance(audience, list) else [audience]
        if settings.OIDC_CLIENT_ID not in audiences:
            raise refuse(request, f"ID token audience {audience!r} is not this client")
        if len(audiences) > 1 and payload.get("azp") != settings.OIDC_CLIENT_ID:
            raise refuse(request, "ID token has several audiences and another authorized party")
        if "exp" not in payload:
            raise refuse(request, "ID token has no expiry")
        return payload

    def get_token(self, payload: dict[str, Any]) -> dict[str, Any]:
        token_info: dict[str, Any] = super().get_token(payload)
        if not token_info.get("id_token"):
            raise refuse(getattr(self, "request", None), "the provider returned no ID token")
        return token_info

    def get_userinfo(
        self, access_token: str, id_token: str, payload: dict[str, Any]
    ) -> dict[str, Any]:
        """The userinfo answer under the verified ID token's claims: some providers (Entra
        ID) put the username or the groups only in the ID token, and a signed claim wins
        over an unsigned one. Both must be about the same subject (OIDC Core §5.3.4)."""
        info: dict[str, Any] = super().get_userinfo(access_token, id_token, payload)
        if not isinstance(info, dict) or info.get("sub") != payload.get("sub"):
            raise refuse(
                getattr(self, "request", None),
                "the userinfo answer is about another subject than the ID token",
            )
        return {**info, **payload}

    # Claims -> account.

    def _username(self, claims: dict[str, Any]) -> str:
        username = claims.get(settings.OIDC_USERNAME_CLAIM)
        if not isinstance(username, str) or not username.strip():
            raise refuse(self.request, f"the provider sent no {settings.OIDC_USERNAME_CLAIM} claim")
        return username.strip()[:150]

    def groups_of(self, claims: dict[str, Any]) -> list[str]:
        names = claims.get("_claim_names")
        if isinstance(names, dict) and settings.OIDC_GROUPS_CLAIM in names:
            # Entra ID's "overage": too many groups to send, only a pointer to them. Taking
            # that as no groups would take every role away.
            raise refuse(
                self.request,
                f"the provider sent a pointer instead of the {settings.OIDC_GROUPS_CLAIM} "
                "claim (too many groups): emit only the groups assigned to the application",
            )
        groups = claims.get(settings.OIDC_GROUPS_CLAIM, [])
        if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
            raise refuse(
                self.request,
                f"the {settings.OIDC_GROUPS_CLAIM} claim is not a list of group names",
            )
        return groups

    def verify_claims(self, claims: dict[str, Any]) -> bool:
        self._username(claims)
        self.groups_of(claims)
        return True

    def filter_users_by_claims(self, claims: dict[str, Any]) -> Any:
        users = self.UserModel.objects.filter(username=self._username(claims))
        if any(user.is_superuser for user in users):
            # A local administrator (the break-glass account among them) is never taken
            # over by a provider account of the same name.
            raise refuse(self.request, "a local administrator's account signs in with its password")
        if any(user.has_usable_password() for user in users):
            # Nor any local account: a username can be reassigned at the provider, and the
            # account's history and token are its owner's. Accounts the provider creates
            # have no usable password.
            raise refuse(
                self.request,
                "a local account with a password has this username: an administrator links "
                "it by removing its password",
            )
        return users

    def create_user(self, claims: dict[str, Any]) -> User:
        with transaction.atomic():
            user = self.UserModel.objects.create_user(
                self._username(claims), email=claims.get("email") or ""
            )
            return self._sync(user, claims)

    def update_user(self, user: User, claims: dict[str, Any]) -> User:
        with transaction.atomic():
            return self._sync(user, claims)

    def _sync(self, user: User, claims: dict[str, Any]) -> User:
        from ledger.services.accounts import apply_provider_groups

        changed = []
        for field, claim in (
            ("email", "email"),
            ("first_name", "given_name"),
            ("last_name", "family_name"),
        ):
            value = claims.get(claim)
            if isinstance(value, str) and value != getattr(user, field):
                setattr(user, field, value[:150] if field != "email" else value[:254])
                changed.append(field)
        if changed:
            user.save(update_fields=changed)
        if user.is_active:
            apply_provider_groups(user, self.groups_of(claims))
        return user
