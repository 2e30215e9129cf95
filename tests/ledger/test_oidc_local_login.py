"""LOCAL_LOGIN=false: the login page offers only the identity provider, and passwords are
refused on every page that takes one (the site's and the admin's) — except the one
break-glass administrator, BREAK_GLASS_USERNAME, at /accounts/login/?break-glass=1."""

from __future__ import annotations

import pytest

from tests.factories import PASSWORD, UserFactory


@pytest.fixture
def provider_only(settings):
    settings.OIDC_ISSUER = "http://127.0.0.1:9/o"  # never asked: the login page reads no discovery
    settings.OIDC_CLIENT_ID = "ledger"
    settings.OIDC_CLIENT_SECRET = "unused"
    settings.OIDC_PROVIDER_NAME = "Acme SSO"
    settings.LOCAL_LOGIN = False
    settings.BREAK_GLASS_USERNAME = "breakglass"


@pytest.mark.django_db
def test_the_login_page_offers_only_the_provider(client, provider_only):
    page = client.get("/accounts/login/?next=/audit/").content.decode()
    assert "Sign in with Acme SSO" in page
    assert 'href="/oidc/authenticate/?next=%2Faudit%2F"' in page
    assert 'name="password"' not in page
    assert "Forgotten your password?" not in page


@pytest.mark.django_db
def test_with_local_login_on_the_page_offers_both(client, settings, provider_only):
    settings.LOCAL_LOGIN = True
    page = client.get("/accounts/login/").content.decode()
    assert "Sign in with Acme SSO" in page and 'name="password"' in page


@pytest.mark.django_db
def test_a_password_is_refused_for_anyone_but_the_break_glass_administrator(client, provider_only):
    UserFactory(username="olga", roles=["auditor"])
    answer = client.post(
        "/accounts/login/?break-glass=1", {"username": "olga", "password": PASSWORD}
    )
    assert answer.status_code == 200 and "_auth_user_id" not in client.session


@pytest.mark.django_db
def test_the_break_glass_administrator_signs_in_with_a_password(client, provider_only):
    admin = UserFactory(username="breakglass", is_superuser=True, is_staff=True)
    page = client.get("/accounts/login/?break-glass=1").content.decode()
    assert 'name="password"' in page and "Break-glass sign-in" in page
    answer = client.post(
        "/accounts/login/?break-glass=1", {"username": "breakglass", "password": PASSWORD}
    )
    assert answer.status_code == 302
    assert client.session["_auth_user_id"] == str(admin.pk)


@pytest.mark.django_db
def test_the_break_glass_name_without_superuser_rights_is_refused(client, provider_only):
    UserFactory(username="breakglass", is_superuser=False)
    client.post("/accounts/login/?break-glass=1", {"username": "breakglass", "password": PASSWORD})
    assert "_auth_user_id" not in client.session


@pytest.mark.django_db
def test_the_admin_login_refuses_passwords_too(client, provider_only):
    UserFactory(username="stan", is_superuser=True, is_staff=True)
    client.post("/admin/login/", {"username": "stan", "password": PASSWORD, "next": "/admin/"})
    assert "_auth_user_id" not in client.session
