"""Guessing is limited: password sign-ins lock per username and address together,
with a higher ceiling per address alone (django-axes), API tokens are throttled (DRF)."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.conf import settings as django_settings
from django.contrib.auth import authenticate
from django.test import Client, RequestFactory
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.throttling import UserRateThrottle

from lib.throttling import WrongTokenThrottle
from tests.factories import PASSWORD, UserFactory

LOGIN_PAGES = {
    "site": ("/accounts/login/", "/"),
    "admin": ("/admin/login/?next=/admin/", "/admin/"),
}
ATTACKER = "203.0.113.7"
ELSEWHERE = "198.51.100.20"
PROXY = "10.0.0.2"


@pytest.fixture
def alice(db):
    # Staff, so that the admin's login accepts her too.
    return UserFactory(username="alice", is_staff=True)


@pytest.fixture
def bob(db):
    return UserFactory(username="bob", is_staff=True)


def sign_in(page: str, username: str, password: str, address: str, **headers) -> tuple:
    """A fresh browser posting the login form of `page` from `address`."""
    client = Client()
    url, _ = LOGIN_PAGES[page]
    response = client.post(
        url, {"username": username, "password": password}, REMOTE_ADDR=address, **headers
    )
    return client, response


def signed_in(page: str, client: Client, response) -> bool:
    _, home = LOGIN_PAGES[page]
    return (
        response.status_code == 302
        and response["Location"] == home
        and ("_auth_user_id" in client.session)
    )


def guess(page: str, username: str, address: str, times: int = 50, **headers) -> list[int]:
    return [
        sign_in(page, username, f"guess-{i}", address, **headers)[1].status_code
        for i in range(times)
    ]


# ---------------------------------------------------------------- password sign-ins


@pytest.mark.parametrize("login_page", LOGIN_PAGES)
def test_fifty_wrong_passwords_then_the_right_one_is_refused_with_the_message(
    login_page, settings, alice
):
    limit = django_settings.AXES_FAILURE_LIMIT
    settings.LOGIN_ADDRESS_FAILURE_LIMIT = 100  # the address's own ceiling is tested below

    statuses = guess(login_page, "alice", ATTACKER)
    client, response = sign_in(login_page, "alice", PASSWORD, ATTACKER)

    # The form again until the limit, then only the lockout.
    assert statuses == [200] * (limit - 1) + [429] * (50 - limit + 1)
    assert response.status_code == 429
    assert not signed_in(login_page, client, response)
    assert "_auth_user_id" not in client.session
    body = response.content.decode()
    assert "Too many failed sign-ins" in body
    assert f"{limit} failed sign-ins in a row for the username alice from your address" in body
    retry_at = timezone.localtime(timezone.now() + django_settings.AXES_COOLOFF_TIME)
    assert f"Try again after {retry_at:%Y-%m-%d %H:%M}" in body
    assert "(in 15 min)" in body
    assert response["Retry-After"] == str(int(django_settings.AXES_COOLOFF_TIME.total_seconds()))
    # In the site's layout, not a bare page.
    assert 'class="topbar"' in body
    assert "<title>Sign-in paused · Inference Release Ledger</title>" in body


@pytest.mark.parametrize("login_page", LOGIN_PAGES)
def test_another_user_from_another_address_is_not_locked(login_page, alice, bob):
    guess(login_page, "alice", ATTACKER)

    client, response = sign_in(login_page, "bob", PASSWORD, ELSEWHERE)

    assert signed_in(login_page, client, response)


@pytest.mark.parametrize("login_page", LOGIN_PAGES)
def test_the_lock_holds_for_the_username_from_that_address_only(login_page, alice, bob):
    guess(login_page, "alice", ATTACKER, times=django_settings.AXES_FAILURE_LIMIT)

    client, same_user_same_address = sign_in(login_page, "alice", PASSWORD, ATTACKER)
    assert same_user_same_address.status_code == 429
    assert not signed_in(login_page, client, same_user_same_address)

    client, same_user_elsewhere = sign_in(login_page, "alice", PASSWORD, ELSEWHERE)
    assert signed_in(login_page, client, same_user_elsewhere)


@pytest.mark.parametrize("login_page", LOGIN_PAGES)
def test_seven_wrong_passwords_for_one_user_do_not_lock_the_others_at_that_address(
    login_page, alice, bob
):
    # One office behind one egress address: a colleague's typos, or someone who wants
    # everyone there locked out, cost the others nothing.
    guess(login_page, "alice", ATTACKER, times=7)

    client, other_user_same_address = sign_in(login_page, "bob", PASSWORD, ATTACKER)

    assert signed_in(login_page, client, other_user_same_address)


@pytest.mark.parametrize("login_page", LOGIN_PAGES)
def test_an_address_guessing_many_usernames_meets_its_own_ceiling(login_page, settings, alice, bob):
    settings.LOGIN_ADDRESS_FAILURE_LIMIT = 12
    # Spraying: few guesses per username, each under the per-username limit; the
    # twelfth from the address is refused.
    for n in range(5):
        assert guess(login_page, f"user{n}", ATTACKER, times=2) == [200, 200]
    assert guess(login_page, "user5", ATTACKER, times=2) == [200, 429]

    client, from_the_address = sign_in(login_page, "bob", PASSWORD, ATTACKER)
    assert from_the_address.status_code == 429
    assert not signed_in(login_page, client, from_the_address)
    body = from_the_address.content.decode()
    assert "There were 12 failed sign-ins from your address" in body
    assert "under any username, so signing in from it is paused for everyone" in body

    client, from_elsewhere = sign_in(login_page, "bob", PASSWORD, ELSEWHERE)
    assert signed_in(login_page, client, from_elsewhere)


def test_a_success_at_the_address_does_not_forget_its_other_failures(settings, alice, bob):
    settings.LOGIN_ADDRESS_FAILURE_LIMIT = 12
    for n in range(11):
        guess("site", f"user{n}", ATTACKER, times=1)
    # The sprayer signs in to an account of his own, hoping to reset the count.
    client, response = sign_in("site", "bob", PASSWORD, ATTACKER)
    assert signed_in("site", client, response)

    assert guess("site", "user-last", ATTACKER, times=1) == [429]
    _, response = sign_in("site", "alice", PASSWORD, ATTACKER)
    assert response.status_code == 429


def test_the_address_ceiling_lifts_after_the_cool_off(settings, alice):
    settings.LOGIN_ADDRESS_FAILURE_LIMIT = 12
    for n in range(6):
        guess("site", f"user{n}", ATTACKER, times=2)

    later = timezone.now() + django_settings.AXES_COOLOFF_TIME + dt.timedelta(seconds=1)
    with time_machine.travel(later, tick=False):
        client, response = sign_in("site", "alice", PASSWORD, ATTACKER)

    assert signed_in("site", client, response)


def test_the_lock_lifts_after_the_cool_off(alice):
    guess("site", "alice", ATTACKER, times=django_settings.AXES_FAILURE_LIMIT)

    later = timezone.now() + django_settings.AXES_COOLOFF_TIME + dt.timedelta(seconds=1)
    with time_machine.travel(later, tick=False):
        client, response = sign_in("site", "alice", PASSWORD, ATTACKER)

    assert signed_in("site", client, response)


def test_a_success_before_the_limit_forgets_the_failures(alice):
    limit = django_settings.AXES_FAILURE_LIMIT
    guess("site", "alice", ATTACKER, times=limit - 1)
    sign_in("site", "alice", PASSWORD, ATTACKER)

    assert guess("site", "alice", ATTACKER, times=limit - 1) == [200] * (limit - 1)


def test_a_forged_x_forwarded_for_does_not_escape_the_lock(alice, bob):
    guess("site", "alice", ATTACKER)

    _, response = sign_in("site", "alice", PASSWORD, ATTACKER, HTTP_X_FORWARDED_FOR=ELSEWHERE)

    assert response.status_code == 429


def test_behind_a_proxy_the_address_is_the_one_the_proxy_saw(settings, alice, bob):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    # The attacker writes his own X-Forwarded-For; the proxy appends what it saw.
    guess("site", "alice", PROXY, HTTP_X_FORWARDED_FOR=f"{ELSEWHERE}, {ATTACKER}")

    client, from_elsewhere = sign_in(
        "site", "alice", PASSWORD, PROXY, HTTP_X_FORWARDED_FOR=ELSEWHERE
    )
    assert signed_in("site", client, from_elsewhere)

    _, from_the_attacker = sign_in("site", "alice", PASSWORD, PROXY, HTTP_X_FORWARDED_FOR=ATTACKER)
    assert from_the_attacker.status_code == 429


def test_a_proxy_header_that_is_no_address_falls_back_to_the_peer(settings, alice):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    limit = django_settings.AXES_FAILURE_LIMIT

    statuses = guess("site", "alice", PROXY, times=limit, HTTP_X_FORWARDED_FOR="not-an-ip")

    # The failures counted against the proxy's own address: alice is locked there, and
    # only there (a client the proxy names is another address).
    assert statuses == [200] * (limit - 1) + [429]
    _, from_the_peer = sign_in("site", "alice", PASSWORD, PROXY)
    assert from_the_peer.status_code == 429
    client, named = sign_in("site", "alice", PASSWORD, PROXY, HTTP_X_FORWARDED_FOR=ELSEWHERE)
    assert signed_in("site", client, named)


def test_authenticate_needs_the_request_to_count_failures(alice):
    # Code that checks a password outside a login page passes the request along.
    request = RequestFactory().post("/accounts/login/", REMOTE_ADDR=ELSEWHERE)

    assert authenticate(request, username="alice", password=PASSWORD) == alice


# ---------------------------------------------------------------- API tokens


def api_client(token: Token | str | None, address: str = ATTACKER, **headers) -> Client:
    if token is not None:
        key = token.key if isinstance(token, Token) else token
        headers["HTTP_AUTHORIZATION"] = f"Token {key}"
    return Client(REMOTE_ADDR=address, **headers)


def test_the_api_answers_429_with_retry_after_past_the_user_rate(monkeypatch, alice, bob):
    monkeypatch.setattr(
        UserRateThrottle, "THROTTLE_RATES", {**UserRateThrottle.THROTTLE_RATES, "user": "3/min"}
    )
    client = api_client(Token.objects.create(user=alice))

    statuses = [client.get("/api/me/").status_code for _ in range(3)]
    response = client.get("/api/me/")

    assert statuses == [200, 200, 200]
    assert response.status_code == 429
    assert 0 < int(response["Retry-After"]) <= 60
    assert response.json()["detail"].startswith("Request was throttled.")
    # Counted per user: another token, from the same address, still gets through.
    assert api_client(Token.objects.create(user=bob)).get("/api/me/").status_code == 200


def test_wrong_tokens_from_one_address_are_throttled(monkeypatch, alice):
    monkeypatch.setattr(
        WrongTokenThrottle,
        "THROTTLE_RATES",
        {**WrongTokenThrottle.THROTTLE_RATES, "wrong_token": "3/min"},
    )
    token = Token.objects.create(user=alice)

    statuses = [api_client("0" * 40).get("/api/me/").status_code for _ in range(3)]
    response = api_client("1" * 40).get("/api/me/")

    assert statuses == [401, 401, 401]
    assert response.status_code == 429
    assert 0 < int(response["Retry-After"]) <= 60
    assert "Too many wrong API tokens from this address" in response.json()["detail"]
    # From that address not even a good token is looked at until the wait is over...
    assert api_client(token).get("/api/me/").status_code == 429
    # ...nor from a forged X-Forwarded-For; elsewhere it works.
    assert api_client(token, HTTP_X_FORWARDED_FOR=ELSEWHERE).get("/api/me/").status_code == 429
    assert api_client(token, address=ELSEWHERE).get("/api/me/").status_code == 200


def test_the_api_rates_come_from_settings():
    rates = django_settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]

    assert set(rates) == {"anon", "user", "wrong_token"}
    assert django_settings.REST_FRAMEWORK["DEFAULT_THROTTLE_CLASSES"] == [
        "rest_framework.throttling.AnonRateThrottle",
        "rest_framework.throttling.UserRateThrottle",
    ]
    assert django_settings.REST_FRAMEWORK["DEFAULT_AUTHENTICATION_CLASSES"][0] == (
        "lib.throttling.TokenAuthentication"
    )
