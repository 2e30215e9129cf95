"""ID tokens the ledger must refuse, made by the real test provider: one issued to another
client (wrong audience), one altered after signing, one past its expiry. Each is handed to
the ledger's backend as the callback would hand it, with the nonce it expects."""

from __future__ import annotations

import base64
import datetime as dt
import json

import pytest
import time_machine
from django.core.exceptions import SuspiciousOperation

from ledger.oidc.backends import ProviderBackend
from tests.support.oidc import CLIENT_ID, CLIENT_SECRET, provider_session, tokens_for

NONCE = "nonce-the-ledger-sent"


@pytest.fixture(scope="module")
def other_client(ledger_client):
    ledger_client.manage(
        "client", "other-app", "--secret", "other-secret", "--redirect-uri", "http://other.test/cb/"
    )
    ledger_client.user("yuri", "provider-pass-10", ["auditors"])
    return ledger_client


def id_token(provider, client_id: str, secret: str, redirect_uri: str) -> str:
    session = provider_session(provider, "yuri", "provider-pass-10")
    tokens = tokens_for(
        provider,
        session,
        client_id=client_id,
        secret=secret,
        redirect_uri=redirect_uri,
        nonce=NONCE,
    )
    return tokens["id_token"]


def verify(token: str) -> dict:
    return ProviderBackend().verify_token(token, nonce=NONCE)


@pytest.mark.django_db
def test_a_token_for_this_client_verifies(oidc, other_client):
    token = id_token(oidc, CLIENT_ID, CLIENT_SECRET, "http://testserver/oidc/callback/")
    assert verify(token)["aud"] == CLIENT_ID


@pytest.mark.django_db
def test_a_token_issued_to_another_client_is_refused(oidc, other_client):
    token = id_token(oidc, "other-app", "other-secret", "http://other.test/cb/")
    with pytest.raises(SuspiciousOperation, match="audience 'other-app' is not this client"):
        verify(token)


@pytest.mark.django_db
def test_a_token_altered_after_signing_is_refused(oidc, other_client):
    token = id_token(oidc, CLIENT_ID, CLIENT_SECRET, "http://testserver/oidc/callback/")
    header, payload, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["groups"] = ["ledger-sre"]
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    with pytest.raises(SuspiciousOperation, match="verification failed"):
        verify(f"{header}.{forged}.{signature}")


@pytest.mark.django_db
def test_a_token_with_another_nonce_is_refused(oidc, other_client):
    token = id_token(oidc, CLIENT_ID, CLIENT_SECRET, "http://testserver/oidc/callback/")
    with pytest.raises(SuspiciousOperation, match="Nonce"):
        ProviderBackend().verify_token(token, nonce="another-sign-in")


@pytest.mark.django_db
def test_an_expired_token_is_refused(oidc, other_client):
    token = id_token(oidc, CLIENT_ID, CLIENT_SECRET, "http://testserver/oidc/callback/")
    with (
        time_machine.travel(dt.datetime.now(dt.UTC) + dt.timedelta(days=2)),
        pytest.raises(SuspiciousOperation, match="expired"),
    ):
        verify(token)
