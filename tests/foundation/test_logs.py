"""Structured logs: JSON lines with the request id and the user id, and never a secret.

`captured` writes every record, DEBUG included, through the formatter and filter
the settings give the console handler, so what is read here is what stdout gets.
"""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator

import pytest
from django.conf import settings
from django.core import mail
from rest_framework.authtoken.models import Token

from lib.logs import ContextFilter, JsonFormatter
from tests.factories import UserFactory
from tests.replay.helpers import backend_on, make_set, replay_now, sample
from tests.support.fake_openai import FakeOpenAI

WRONG_PASSWORD = "Wrong-Pa55word-that-must-not-be-logged"
NEW_PASSWORD = "New-Pa55phrase-that-must-not-be-logged"
BACKEND_KEY = "sk-backend-credential-never-logged-0123"
SENSITIVE_REPLY = "Patient 7781-2231 takes 40mg daily"
METRICS_TOKEN = "metrics-bearer-token-never-logged-42"
CREDENTIAL_ENV = "LEDGER_BACKEND_KEY_LOG_TEST"


class Captured:
    def __init__(self, stream: io.StringIO) -> None:
        self.stream = stream

    @property
    def text(self) -> str:
        return self.stream.getvalue()

    def lines(self) -> list[dict]:
        return [json.loads(line) for line in self.text.splitlines() if line.strip()]

    def access(self) -> list[dict]:
        return [line for line in self.lines() if line["name"] == "ledger.access"]


@pytest.fixture
def captured() -> Iterator[Captured]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter(fmt=settings.LOGGING["formatters"]["json"]["fmt"]))
    handler.addFilter(ContextFilter())
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield Captured(stream)
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


# ---------------------------------------------------------------- request id


def test_a_proxys_request_id_comes_back_and_is_on_every_line(client, owner, captured):
    client.force_login(owner)

    response = client.get("/services/", HTTP_X_REQUEST_ID="edge-7f3a9c21")

    assert response["X-Request-ID"] == "edge-7f3a9c21"
    (line,) = captured.access()
    assert line["request_id"] == "edge-7f3a9c21"
    assert line["user_id"] == owner.pk
    assert (line["view"], line["route"], line["status"], line["method"]) == (
        "releases:service_list",
        "services/",
        200,
        "GET",
    )
    assert isinstance(line["duration_ms"], float)


@pytest.mark.parametrize(
    "offered",
    ["short", "has spaces in it", "x" * 65, "id\nforged: line", "<script>alert(1)</script>"],
)
def test_a_request_id_of_another_shape_is_replaced(client, db, captured, offered):
    response = client.get("/healthz", HTTP_X_REQUEST_ID=offered)

    generated = response["X-Request-ID"]
    assert re.fullmatch(r"[0-9a-f]{32}", generated)
    assert offered not in captured.text
    assert captured.access()[0]["request_id"] == generated


def test_without_a_request_id_each_request_gets_its_own(client, db):
    first = client.get("/healthz")["X-Request-ID"]
    second = client.get("/healthz")["X-Request-ID"]

    assert first != second


def test_an_api_tokens_owner_is_the_user_on_the_line(client, owner, captured):
    key = Token.objects.create(user=owner).key

    client.get("/api/services/", HTTP_AUTHORIZATION=f"Token {key}")

    assert captured.access()[0]["user_id"] == owner.pk


def test_anonymous_requests_have_no_user(client, db, captured):
    client.get("/accounts/login/")

    assert captured.access()[0]["user_id"] is None


def test_the_access_line_names_the_route_never_the_path(client, db, captured):
    client.get("/accounts/reset/MQ/secret-looking-token-123/")

    line = captured.access()[0]
    assert line["route"] == "accounts/reset/<uidb64>/<token>/"
    assert "secret-looking-token-123" not in captured.text


# ---------------------------------------------------------------- no secret in the logs


def _security_flows(client, settings, monkeypatch) -> list[str]:
    """Sign-ins, tokens, a backend credential, a sensitive answer, a password reset
    and the metrics token; returns every secret they handled."""
    secrets = [WRONG_PASSWORD, NEW_PASSWORD, BACKEND_KEY, SENSITIVE_REPLY, METRICS_TOKEN]
    victim = UserFactory(username="vera", email="vera@example.com", is_staff=True)

    # Wrong passwords, on the site's login and the admin's.
    client.post("/accounts/login/", {"username": "vera", "password": WRONG_PASSWORD})
    client.post("/admin/login/?next=/admin/", {"username": "vera", "password": WRONG_PASSWORD})
    # A right one: its session key is a credential too.
    client.post(
        "/accounts/login/", {"username": "vera", "password": "correct horse battery staple"}
    )
    secrets.append(client.cookies["sessionid"].value)
    client.get("/services/")
    client.logout()

    # API tokens: a right one, a wrong one.
    key = Token.objects.create(user=victim).key
    client.get("/api/services/", HTTP_AUTHORIZATION=f"Token {key}")
    wrong = "f" * 40
    client.get("/api/services/", HTTP_AUTHORIZATION=f"Token {wrong}")
    secrets += [key, wrong]

    # A replay against a backend that needs a credential, with a sensitive sample; then
    # once more with the wrong credential (the backend refuses it).
    monkeypatch.setenv(CREDENTIAL_ENV, BACKEND_KEY)
    with FakeOpenAI() as fake:
        fake.configure(api_key=BACKEND_KEY)
        backend = backend_on(fake, credential_env=CREDENTIAL_ENV)
        sample_set = make_set(
            "private",
            [sample("p", f'fake: reply="{SENSITIVE_REPLY}"', sensitive=True, checks=[])],
        )
        run = replay_now(backend, sample_set)
        assert run.state == "finished", run.summary
        fake.configure(api_key="sk-the-backend-wants-another-key")
        replay_now(backend, sample_set)

    # A password reset: the link's token and the new password.
    client.post("/accounts/password-reset/", {"email": "vera@example.com"})
    path = re.search(r"(/accounts/reset/\S+/\S+/)", mail.outbox[-1].body).group(1)
    secrets.append(path.rstrip("/").rsplit("/", 1)[-1])
    form_url = client.get(path)["Location"]
    client.post(form_url, {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD})

    # The metrics token, right and wrong, from afar.
    settings.METRICS_TOKEN = METRICS_TOKEN
    client.get("/metrics", REMOTE_ADDR="203.0.113.9", HTTP_AUTHORIZATION=f"Bearer {METRICS_TOKEN}")
    client.get("/metrics", REMOTE_ADDR="203.0.113.9", HTTP_AUTHORIZATION="Bearer not-it-123456")
    secrets.append("not-it-123456")
    return secrets


def test_no_secret_reaches_the_logs(client, db, settings, monkeypatch, captured):
    secrets = _security_flows(client, settings, monkeypatch)

    text = captured.text
    assert len(captured.access()) >= 10  # the flows did log
    assert "AXES: User login failed" in text  # …the failed sign-ins included
    leaked = [secret for secret in secrets if secret in text]
    assert leaked == [], [line for line in text.splitlines() if any(s in line for s in leaked)][:5]
