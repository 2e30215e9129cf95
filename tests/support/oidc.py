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
