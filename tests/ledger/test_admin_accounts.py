"""The admin's accounts page: people, roles, teams and API tokens, each change an event."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token

from ledger.models import Contact, Event
from ledger.roles import Role, roles_of
from tests.factories import UserFactory
from tests.ledger.factories import TeamFactory

USERS = "/admin/auth/user/"


@pytest.fixture
def admin_user(db):
    return UserFactory(username="root", is_superuser=True, is_staff=True)


@pytest.fixture
def staff(db):
    """Staff but no superuser: may open the admin, not manage accounts."""
    return UserFactory(username="stella", is_staff=True)


def token_page(user: User) -> str:
    return f"{USERS}{user.pk}/api-token/"


def api_status(client, key: str) -> int:
    client.logout()
    return client.get("/api/services/", HTTP_AUTHORIZATION=f"Token {key}").status_code


def test_an_administrator_creates_a_person_with_roles_and_teams(client, admin_user):
    team = TeamFactory(slug="kb-team")
    client.force_login(admin_user)

    response = client.post(
        f"{USERS}add/",
        {
            "username": "nina",
            "email": "nina@example.com",
            "usable_password": "true",
            "password1": "a-long-passphrase-for-nina",
            "password2": "a-long-passphrase-for-nina",
            "roles": [Role.MODEL_OWNER, Role.PLATFORM_SRE],
            "teams": [team.pk],
        },
    )

    assert response.status_code == 302, response.content.decode()[:3000]
    nina = User.objects.get(username="nina")
    assert roles_of(nina) == [Role.MODEL_OWNER, Role.PLATFORM_SRE]
    assert list(nina.teams.all()) == [team]
    roles_event = Event.objects.get(action="account.roles_changed", subject_id=str(nina.pk))
    assert roles_event.actor == admin_user
    assert roles_event.payload_data["added"] == ["model_owner", "platform_sre"]
    assert Event.objects.get(action="team.members_added").payload_data == {"members": ["nina"]}


def test_changing_roles_records_what_was_added_and_removed(client, admin_user, owner):
    client.force_login(admin_user)
    page = client.get(f"{USERS}{owner.pk}/change/").content.decode()
    assert re.search(r'name="roles" value="model_owner"[^>]*checked', page)
    assert not re.search(r'name="roles" value="auditor"[^>]*checked', page)

    response = client.post(
        f"{USERS}{owner.pk}/change/",
        {
            "username": owner.username,
            "email": "",
            "roles": [Role.AUDITOR],
            "is_active": "on",
            "date_joined_0": "2026-01-01",
            "date_joined_1": "00:00:00",
        },
    )

    assert response.status_code == 302, response.content.decode()[:3000]
    assert roles_of(User.objects.get(pk=owner.pk)) == [Role.AUDITOR]
    event = Event.objects.get(action="account.roles_changed")
    assert (event.payload_data["added"], event.payload_data["removed"]) == (
        ["auditor"],
        ["model_owner"],
    )


def _change(client, person, **fields):
    return client.post(
        f"{USERS}{person.pk}/change/",
        {
            "username": person.username,
            "email": person.email,
            "roles": [Role.MODEL_OWNER],
            "is_active": "on",
            "date_joined_0": "2026-01-01",
            "date_joined_1": "00:00:00",
            **fields,
        },
    )


def test_an_administrator_gives_a_person_a_phone_or_pager_number(client, admin_user, owner, team):
    client.force_login(admin_user)
    page = client.get(f"{USERS}{owner.pk}/change/").content.decode()
    assert 'name="phone"' in page and "Phone or pager" in page

    response = _change(client, owner, phone=" +86 138-0000 0000 ", teams=[team.pk])

    assert response.status_code == 302, response.content.decode()[:3000]
    assert Contact.objects.get(user=owner).phone == "+86 138-0000 0000"
    page = client.get(f"{USERS}{owner.pk}/change/").content.decode()
    assert 'value="+86 138-0000 0000"' in page
    # A contact detail like the e-mail, not a decision: the append-only chain keeps no number.
    assert not Event.objects.filter(payload__icontains="138").exists()


def test_a_phone_that_is_not_a_number_is_refused_naming_the_field(client, admin_user, owner, team):
    client.force_login(admin_user)

    response = _change(client, owner, phone="call Olivia", teams=[team.pk])

    assert response.status_code == 200
    assert "Phone or pager: “call Olivia” is not a number" in response.content.decode()
    assert not Contact.objects.filter(user=owner).exists()


def test_leaving_a_team_is_refused_with_the_reason(client, admin_user, owner, team):
    client.force_login(admin_user)

    response = client.post(
        f"{USERS}{owner.pk}/change/",
        {"username": owner.username, "roles": [Role.MODEL_OWNER], "is_active": "on"},
    )

    assert response.status_code == 200
    assert "Teams cannot be left here yet (kb-team)" in response.content.decode()
    assert list(owner.teams.all()) == [team]


def test_the_list_shows_roles_teams_and_a_token_prefix(client, admin_user, owner, team):
    key = Token.objects.create(user=owner).key
    client.force_login(admin_user)

    page = client.get(USERS).content.decode()

    assert "Model owner" in page
    assert "kb-team" in page
    assert f"{key[:6]}…" in page
    assert key not in page


def test_a_new_token_is_shown_once_on_the_page_that_issued_it(client, admin_user, owner):
    client.force_login(admin_user)

    response = client.post(token_page(owner), {"do": "issue"})

    key = Token.objects.get(user=owner).key
    page = response.content.decode()
    assert response.status_code == 200
    assert page.count(key) == 1
    assert "Copy it now: it is not shown again." in page
    assert "no-store" in response["Cache-Control"]
    # Anywhere after: its first characters only.
    for url in (token_page(owner), USERS, f"{USERS}{owner.pk}/change/", "/admin/"):
        later = client.get(url).content.decode()
        assert key not in later, url
        assert key[:12] not in later, url
    assert f"{key[:6]}…" in client.get(token_page(owner)).content.decode()
    event = Event.objects.get(action="account.token_issued")
    assert event.payload_data == {"prefix": f"{key[:6]}…", "replaced": None}
    assert key not in event.payload
    assert api_status(client, key) == 200


def test_replacing_a_token_refuses_the_old_one(client, admin_user, owner):
    old = Token.objects.create(user=owner).key
    client.force_login(admin_user)

    client.post(token_page(owner), {"do": "issue"})

    new = Token.objects.get(user=owner).key
    assert new != old
    assert (
        Event.objects.get(action="account.token_issued").payload_data["replaced"] == f"{old[:6]}…"
    )
    assert api_status(client, old) == 401
    assert api_status(client, new) == 200


def test_revoking_a_token_refuses_it_at_once(client, admin_user, owner):
    key = Token.objects.create(user=owner).key
    client.force_login(admin_user)

    response = client.post(token_page(owner), {"do": "revoke"}, follow=True)

    assert "is revoked" in response.content.decode()
    assert not Token.objects.filter(user=owner).exists()
    assert Event.objects.get(action="account.token_revoked").payload_data == {
        "prefix": f"{key[:6]}…"
    }
    assert api_status(client, key) == 401


def test_the_list_action_revokes_the_selected_tokens(client, admin_user, owner, sre):
    Token.objects.create(user=owner)
    client.force_login(admin_user)

    response = client.post(
        USERS,
        {"action": "revoke_tokens", "_selected_action": [owner.pk, sre.pk]},
        follow=True,
    )

    assert "API tokens revoked: olivia." in response.content.decode()
    assert not Token.objects.exists()
    assert Event.objects.filter(action="account.token_revoked").count() == 1


def test_the_token_page_needs_a_post_to_act(client, admin_user, owner):
    client.force_login(admin_user)

    assert client.get(token_page(owner)).status_code == 200
    assert client.post(token_page(owner), {"do": "explode"}).status_code == 400
    assert not Token.objects.exists()


def test_staff_who_are_not_administrators_cannot_manage_accounts(client, staff, owner):
    client.force_login(staff)

    assert client.get(USERS).status_code == 403
    assert client.get(f"{USERS}{owner.pk}/change/").status_code == 403
    assert client.post(token_page(owner), {"do": "issue"}).status_code == 403
    assert client.get("/admin/authtoken/tokenproxy/").status_code == 403
    assert not Token.objects.exists()


def test_people_are_deactivated_not_deleted(client, admin_user, owner):
    client.force_login(admin_user)

    assert client.get(f"{USERS}{owner.pk}/delete/").status_code == 403


def test_the_account_verbs_refuse_anyone_but_an_administrator(owner, sre):
    from django.core.exceptions import PermissionDenied

    from ledger import services

    for verb in (
        lambda: services.set_roles(sre, [Role.AUDITOR], actor=owner),
        lambda: services.issue_api_token(sre, actor=owner),
        lambda: services.revoke_api_token(sre, actor=owner),
    ):
        with pytest.raises(PermissionDenied):
            verb()
    assert roles_of(User.objects.get(pk=sre.pk)) == [Role.PLATFORM_SRE]
    assert not Token.objects.exists()
    assert not Event.objects.filter(action__startswith="account.").exists()
