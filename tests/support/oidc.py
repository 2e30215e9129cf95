"""The test identity provider (tests/support/oidc_provider) as a real process on loopback,
and the person's side of its login page for tests that drive the code flow without a
browser (the browser tests use its page through Playwright)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.support.processes import BIN, ROOT, _stop, child_env, free_port

# The ledger as the provider knows it, and the map the tests sign in under.
CLIENT_ID = "ledger"
CLIENT_SECRET = "test-only-ledger-client-secret"
PROVIDER_NAME = "Acme SSO"
GROUP_MAP = {
    "ledger-sre": {"roles": ["platform_sre"], "teams": ["platform"]},
    "kb-owners": {"roles": ["model_owner"], "teams": ["kb-team"]},
    "auditors": {"roles": ["auditor"]},
}


@dataclass
class Provider:
    base: str
    issuer: str
    env: dict[str, str] = field(repr=False)

    def manage(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "django", "provider", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    def client(self, client_id: str, secret: str, base_url: str) -> None:
        """A confidential client whose redirect URI is base_url's /oidc/callback/ exactly."""
        self.manage(
            "client",
            client_id,
            "--secret",
            secret,
            "--redirect-uri",
            f"{base_url}/oidc/callback/",
            "--post-logout-uri",
            f"{base_url}/accounts/login/",
        )

    def user(self, username: str, password: str, groups: list[str], email: str = "") -> None:
        self.manage(
            "user",
            username,
            "--password",
            password,
            "--groups",
            ",".join(groups),
            "--email",
            email or f"{username}@example.com",
        )


@contextlib.contextmanager
def provider_process(data_dir: Path, timeout: float = 180) -> Iterator[Provider]:
    """Migrate the provider's SQLite database, start it under gunicorn, and yield once its
    discovery document answers. `timeout` only bounds a provider that never comes up."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    key_file = data_dir / "provider-rsa.pem"
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    env = child_env(
        DJANGO_SETTINGS_MODULE="tests.support.oidc_provider.settings",
        PROVIDER_DATA_DIR=str(data_dir),
        PROVIDER_ISSUER=f"{base}/o",
        PROVIDER_RSA_KEY_FILE=str(key_file),
        PYTHONPATH=str(ROOT),
    )
    migrate = subprocess.run(
        [sys.executable, "-m", "django", "migrate", "--noinput"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert migrate.returncode == 0, migrate.stderr[-3000:]
    process = subprocess.Popen(
        [
            str(BIN / "gunicorn"),
            "tests.support.oidc_provider.wsgi:application",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "1",
            "--threads",
            "4",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + timeout
    try:
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the provider exited early:\n{_stop(process)}")
            try:
                if requests.get(f"{base}/o/.well-known/openid-configuration", timeout=30).ok:
                    break
            except requests.RequestException:  # refused while it binds
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the provider did not answer:\n{_stop(process)}")
            time.sleep(0.05)
        yield Provider(base=base, issuer=f"{base}/o", env=env)
    finally:
        _stop(process)


def provider_session(provider: Provider, username: str, password: str) -> requests.Session:
    """A browser-less person signed in at the provider's login page."""
    session = requests.Session()
    page = session.get(f"{provider.base}/accounts/login/", timeout=30)
    assert page.status_code == 200
    answer = session.post(
        f"{provider.base}/accounts/login/",
        data={
            "username": username,
            "password": password,
            "csrfmiddlewaretoken": session.cookies["provider_csrftoken"],
            "next": "/o/",
        },
        allow_redirects=False,
        timeout=30,
    )
    assert answer.status_code == 302, answer.text[:2000]
    return session


def authorize(session: requests.Session, authorize_url: str) -> str:
    """The provider's answer to the ledger's authorization request: where it sends the
    browser back (the ledger's callback, with code and state)."""
    answer = session.get(authorize_url, allow_redirects=False, timeout=30)
    assert answer.status_code == 302, answer.text[:2000]
    return answer.headers["Location"]


def tokens_for(
    provider: Provider,
    session: requests.Session,
    *,
    client_id: str,
    secret: str,
    redirect_uri: str,
    nonce: str,
) -> dict:
    """A whole code flow (PKCE included) for some client, as that client would run it:
    the provider's real tokens, to hand to the ledger as if they had come for it."""
    import base64
    import hashlib
    import secrets
    from urllib.parse import parse_qs, urlencode, urlsplit

    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=")
    query = urlencode(
        {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": redirect_uri,
            "scope": "openid email profile groups",
            "state": secrets.token_urlsafe(16),
            "nonce": nonce,
            "code_challenge": challenge.decode(),
            "code_challenge_method": "S256",
        }
    )
    back = urlsplit(authorize(session, f"{provider.issuer}/authorize/?{query}"))
    code = parse_qs(back.query)["code"][0]
    answer = requests.post(
        f"{provider.issuer}/token/",
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": redirect_uri,
            "client_id": client_id,
            "client_secret": secret,
            "code_verifier": verifier,
        },
        timeout=30,
    )
    assert answer.status_code == 200, answer.text[:2000]
    return answer.json()


def configure_ledger(settings, provider: Provider, client_id: str = CLIENT_ID) -> None:
    """Point the ledger (pytest-django's `settings`) at the provider as `client_id`."""
    import json

    from ledger.oidc import discovery
    from lib.group_map import parse_group_map, provider_origin

    settings.OIDC_ISSUER = provider.issuer
    settings.OIDC_CLIENT_ID = client_id
    settings.OIDC_CLIENT_SECRET = CLIENT_SECRET
    settings.OIDC_PROVIDER_NAME = PROVIDER_NAME
    settings.OIDC_GROUP_MAP = parse_group_map(json.dumps(GROUP_MAP))
    policy = settings.CONTENT_SECURITY_POLICY
    directives = {**policy["DIRECTIVES"]}
    directives["form-action"] = [*directives["form-action"], provider_origin(provider.issuer)]
    settings.CONTENT_SECURITY_POLICY = {**policy, "DIRECTIVES": directives}
    discovery.forget()
