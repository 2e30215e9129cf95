"""API tokens in the admin: a key is shown whole once, when it is created, and as
its first characters everywhere after."""

from __future__ import annotations

import re

import pytest
from django.contrib.admin.models import LogEntry
from rest_framework.authtoken.models import Token

from tests.factories import UserFactory

TOKENS = "/admin/authtoken/tokenproxy/"


@pytest.fixture
def admin_user(db):
    return UserFactory(username="root", is_superuser=True, is_staff=True)


def admin_pages(admin_user, *users) -> list[str]:
    """Every admin page where a token or its user shows."""
    pages = ["/admin/", TOKENS, f"{TOKENS}?q=alice", f"{TOKENS}add/", "/admin/auth/user/"]
    for user in users:
        pages += [
            f"{TOKENS}{user.pk}/change/",
            f"{TOKENS}{user.pk}/history/",
            f"{TOKENS}{user.pk}/delete/",
            f"/admin/auth/user/{user.pk}/change/",
        ]
    return pages


def test_no_admin_page_shows_a_whole_token_key(client, admin_user, owner, sre):
    client.force_login(admin_user)
    # One token made through the admin, so that "Recent actions" lists it too.
    client.post(f"{TOKENS}add/", {"user": owner.pk})
    client.get(TOKENS)  # the one message that shows the new key whole
    keys = [Token.objects.get(user=owner).key, Token.objects.create(user=sre).key]

    for url in admin_pages(admin_user, owner, sre):
        response = client.get(url)

        assert response.status_code == 200, url
        page = response.content.decode()
        for key in keys:
            assert key not in page, url
            assert key[:12] not in page, url
    assert not LogEntry.objects.filter(object_repr__contains=keys[0]).exists()


def test_the_token_list_shows_a_prefix_of_each_key(client, admin_user, owner):
    key = Token.objects.create(user=owner).key
    client.force_login(admin_user)

    page = client.get(TOKENS).content.decode()

    assert f"{key[:6]}…" in page
    assert re.search(rf'<a href="{TOKENS}{owner.pk}/change/">{key[:6]}…', page)


def test_a_new_token_is_shown_whole_once_in_a_message(client, admin_user, owner):
    client.force_login(admin_user)

    response = client.post(f"{TOKENS}add/", {"user": owner.pk}, follow=True)

    key = Token.objects.get(user=owner).key
    page = response.content.decode()
    assert response.redirect_chain[-1][0] == TOKENS
    assert page.count(key) == 1
    assert "Copy it now: it is not shown again." in page
    assert key not in client.get(TOKENS).content.decode()
