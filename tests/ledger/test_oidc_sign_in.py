"""Sign-in with the identity provider, driven through a real OpenID Connect provider
(django-oauth-toolkit on loopback, tests/support/oidc_provider): the code flow with PKCE,
state and nonce, roles and teams from its groups at every sign-in, the refusals, and
sign-out at the provider. The person's browser is the Django test client on the ledger's
side and a requests session on the provider's (the browser tests use its real page)."""

from __future__ import annotations

import logging
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token

from ledger.models import Event, Team
from ledger.roles import Role, roles_of
from tests.support.oidc import CLIENT_ID, authorize, provider_session


def start(client, next_url: str | None = None) -> str:
    answer = client.get("/oidc/authenticate/", {"next": next_url} if next_url else {})
    assert answer.status_code == 302, answer.content[:2000]
    return answer["Location"]


def sign_in(client, provider, username: str, password: str, next_url: str | None = None):
    authorize_url = start(client, next_url)
    callback = urlsplit(authorize(provider_session(provider, username, password), authorize_url))
    assert callback.netloc == "testserver" and callback.path == "/oidc/callback/"
    return client.get(f"{callback.path}?{callback.query}")


@pytest.mark.django_db
def test_the_authorization_request_carries_state_nonce_and_a_pkce_challenge(client, oidc):
    query = parse_qs(urlsplit(start(client)).query)
    assert query["client_id"] == [CLIENT_ID]
    assert query["redirect_uri"] == ["http://testserver/oidc/callback/"]
    assert query["code_challenge_method"] == ["S256"]
    assert query["state"] and query["nonce"] and query["code_challenge"]


@pytest.mark.django_db
def test_a_new_person_is_created_with_the_roles_and_teams_their_groups_map_to(client, oidc):
    Team.objects.create(slug="platform", name="Platform")
    oidc.user("priya", "provider-pass-1", ["ledger-sre", "unmapped"])

    answer = sign_in(client, oidc, "priya", "provider-pass-1")

    assert answer.status_code == 302 and answer["Location"] == "/"
    priya = User.objects.get(username="priya")
    assert roles_of(priya) == [Role.PLATFORM_SRE]
    assert [team.slug for team in priya.teams.all()] == ["platform"]
    assert not priya.has_usable_password()
    roles_event = Event.objects.get(action="account.roles_changed")
    assert roles_event.payload_data["added"] == ["platform_sre"]
    assert roles_event.payload_data["source"] == f"oidc: Acme SSO ({oidc.issuer})"
    assert roles_event.actor_label == "system"
    team_event = Event.objects.get(action="team.members_added")
    assert team_event.payload_data["members"] == ["priya"]
    assert "Acme SSO" in team_event.payload_data["source"]
    assert client.get("/").wsgi_request.user == priya


@pytest.mark.django_db
def test_a_group_change_at_the_provider_is_applied_at_the_next_sign_in(client, oidc):
    Team.objects.create(slug="platform", name="Platform")
    Team.objects.create(slug="kb-team", name="Knowledge base")
    oidc.user("quinn", "provider-pass-2", ["ledger-sre"])
    sign_in(client, oidc, "quinn", "provider-pass-2")
    client.post("/accounts/logout/")

    oidc.user("quinn", "provider-pass-2", ["kb-owners", "auditors"])
    sign_in(client, oidc, "quinn", "provider-pass-2")

    quinn = User.objects.get(username="quinn")
    assert roles_of(quinn) == [Role.MODEL_OWNER, Role.AUDITOR]
    assert [team.slug for team in quinn.teams.all()] == ["kb-team"]
    changed = Event.objects.filter(action="account.roles_changed").order_by("sequence").last()
    assert changed.payload_data["added"] == ["auditor", "model_owner"]
    assert changed.payload_data["removed"] == ["platform_sre"]
    removed = Event.objects.get(action="team.members_removed")
    assert removed.subject_label == "Platform" and removed.payload_data["members"] == ["quinn"]


@pytest.mark.django_db
def test_a_person_whose_groups_map_to_nothing_signs_in_with_no_role_and_is_told_whom_to_ask(
    client, oidc, django_user_model
):
    django_user_model.objects.create_superuser("root-admin", "root@example.com", "x")
    oidc.user("rhea", "provider-pass-3", ["unmapped"])

    answer = sign_in(client, oidc, "rhea", "provider-pass-3")

    assert answer.status_code == 302 and answer["Location"] == "/oidc/no-role/"
    page = client.get("/oidc/no-role/")
    text = page.content.decode()
    assert "none of your groups at Acme SSO gives a role" in text
    assert "ledger-sre" in text and "root@example.com" in text
    assert roles_of(User.objects.get(username="rhea")) == []


@pytest.mark.django_db
def test_a_person_taken_out_of_every_mapped_group_loses_their_roles_and_api_token(client, oidc):
    oidc.user("sven", "provider-pass-4", ["auditors"])
    sign_in(client, oidc, "sven", "provider-pass-4")
    sven = User.objects.get(username="sven")
    Token.objects.create(user=sven)
    client.post("/accounts/logout/")

    oidc.user("sven", "provider-pass-4", [])
    sign_in(client, oidc, "sven", "provider-pass-4")

    assert roles_of(User.objects.get(username="sven")) == []
    assert not Token.objects.filter(user=sven).exists()
    revoked = Event.objects.get(action="account.token_revoked")
    assert "Acme SSO" in revoked.payload_data["source"]


@pytest.mark.django_db
def test_the_next_url_is_kept_on_site_and_an_off_site_one_is_dropped(client, oidc):
    oidc.user("tara", "provider-pass-5", ["auditors"])
    assert sign_in(client, oidc, "tara", "provider-pass-5", "/audit/")["Location"] == "/audit/"
    client.post("/accounts/logout/")
    answer = sign_in(client, oidc, "tara", "provider-pass-5", "https://evil.example.com/")
    assert answer["Location"] == "/"


@pytest.mark.django_db
def test_a_callback_with_a_state_this_browser_did_not_start_is_refused_and_logged(
    client, oidc, caplog
):
    oidc.user("uma", "provider-pass-6", ["auditors"])
    authorize_url = start(client)
    callback = urlsplit(authorize(provider_session(oidc, "uma", "provider-pass-6"), authorize_url))
    code = parse_qs(callback.query)["code"][0]

    with caplog.at_level(logging.WARNING, logger="ledger.oidc.views"):
        answer = client.get("/oidc/callback/", {"code": code, "state": "not-the-state-we-sent"})

    assert answer.status_code == 403
    assert "Sign-in refused" in answer.content.decode()
    assert "state not found" in caplog.text
    assert not User.objects.filter(username="uma").exists()


@pytest.mark.django_db
def test_a_callback_in_a_browser_that_never_started_a_sign_in_is_refused(client, oidc, caplog):
    with caplog.at_level(logging.WARNING, logger="ledger.oidc.views"):
        answer = client.get("/oidc/callback/", {"code": "abc", "state": "xyz"})
    assert answer.status_code == 403
    assert "state unknown" in caplog.text


@pytest.mark.django_db
def test_a_groups_claim_that_is_not_a_list_is_refused(client, oidc, caplog):
    oidc.user("vera", "provider-pass-7", ["auditors", "~groups-as-a-string"])
    with caplog.at_level(logging.WARNING):
        answer = sign_in(client, oidc, "vera", "provider-pass-7")
    assert answer.status_code == 403
    assert "groups claim is not a list" in caplog.text
    assert not User.objects.filter(username="vera").exists()


@pytest.mark.django_db
def test_a_local_administrator_is_never_taken_over_by_a_provider_account_of_that_name(
    client, oidc, django_user_model, caplog
):
    django_user_model.objects.create_superuser("breakglass", "bg@example.com", "x")
    oidc.user("breakglass", "provider-pass-8", ["auditors"])
    with caplog.at_level(logging.WARNING):
        answer = sign_in(client, oidc, "breakglass", "provider-pass-8")
    assert answer.status_code == 403
    assert "local administrator" in caplog.text


@pytest.mark.django_db
def test_a_local_account_with_a_password_is_not_taken_over_by_a_provider_account(
    client, oidc, django_user_model, caplog
):
    local = django_user_model.objects.create_user("dana", "dana@example.com", "local-pass-1")
    oidc.user("dana", "provider-pass-9", ["ledger-sre"])
    with caplog.at_level(logging.WARNING):
        answer = sign_in(client, oidc, "dana", "provider-pass-9")
    assert answer.status_code == 403
    assert "a local account with a password has this username" in caplog.text
    local.refresh_from_db()
    assert roles_of(local) == [] and local.has_usable_password()
    assert not Event.objects.filter(action="account.roles_changed").exists()


@pytest.mark.django_db
def test_the_provider_down_gives_a_page_naming_it_and_the_break_glass_path(client, oidc, settings):
    from tests.support.processes import free_port

    settings.OIDC_ISSUER = f"http://127.0.0.1:{free_port()}/o"
    settings.OIDC_TIMEOUT_SECONDS = 2
    answer = client.get("/oidc/authenticate/")
    assert answer.status_code == 503
    text = answer.content.decode()
    assert "Acme SSO cannot be reached" in text
    assert "/accounts/login/?break-glass=1" in text


@pytest.mark.django_db
def test_sign_out_ends_the_session_and_the_providers(client, oidc):
    oidc.user("wren", "provider-pass-9", ["auditors"])
    authorize_url = start(client)
    at_provider = provider_session(oidc, "wren", "provider-pass-9")
    callback = urlsplit(authorize(at_provider, authorize_url))
    client.get(f"{callback.path}?{callback.query}")

    answer = client.post("/accounts/logout/")

    assert answer.status_code == 302
    logout = urlsplit(answer["Location"])
    assert f"{logout.scheme}://{logout.netloc}{logout.path}" == f"{oidc.issuer}/logout/"
    query = parse_qs(logout.query)
    assert query["post_logout_redirect_uri"] == ["http://testserver/accounts/login/"]
    assert query["id_token_hint"]
    assert "_auth_user_id" not in client.session
    # The provider ends its own session and sends the browser back to the ledger.
    back = at_provider.get(answer["Location"], allow_redirects=False, timeout=30)
    assert (
        back.status_code == 302 and back.headers["Location"] == "http://testserver/accounts/login/"
    )
    again = at_provider.get(start(client), allow_redirects=False, timeout=30)
    assert "/accounts/login/" in again.headers["Location"]


@pytest.mark.django_db
def test_without_an_issuer_the_provider_pages_do_not_exist(client, settings):
    settings.OIDC_ISSUER = ""
    assert client.get("/oidc/authenticate/").status_code == 404
    assert client.get("/oidc/callback/", {"code": "a", "state": "b"}).status_code == 404
    assert "Sign in with" not in client.get("/accounts/login/").content.decode()


@pytest.mark.django_db
def test_a_discovery_document_stating_another_issuer_is_not_trusted(client, oidc, settings, caplog):
    # The provider's issuer is .../o; asked as .../o/ it answers a document stating .../o.
    settings.OIDC_ISSUER = f"{oidc.issuer}/"
    with caplog.at_level(logging.WARNING, logger="ledger.oidc"):
        answer = client.get("/oidc/authenticate/")
    assert answer.status_code == 503
    assert "states issuer" in caplog.text


@pytest.mark.django_db
def test_the_group_map_in_force_is_recorded_once_and_again_when_it_changes(client, oidc, settings):
    Team.objects.create(slug="platform", name="Platform")
    oidc.user("mira", "provider-pass-7", ["ledger-sre"])
    sign_in(client, oidc, "mira", "provider-pass-7")
    client.logout()
    sign_in(client, oidc, "mira", "provider-pass-7")
    recorded = Event.objects.filter(action="account.group_map_applied")
    assert recorded.count() == 1
    first = recorded.get().payload_data
    assert first["map"] == settings.OIDC_GROUP_MAP and first["before"] is None
    assert first["source"] == f"oidc: Acme SSO ({oidc.issuer})"

    settings.OIDC_GROUP_MAP = {**settings.OIDC_GROUP_MAP, "ledger-audit": {"roles": ["auditor"]}}
    client.logout()
    sign_in(client, oidc, "mira", "provider-pass-7")
    latest = Event.objects.filter(action="account.group_map_applied").order_by("-sequence")
    assert latest.count() == 2
    second = latest.first().payload_data
    assert second["before"] == first["map"]
    assert second["map"]["ledger-audit"] == {"roles": ["auditor"]}
