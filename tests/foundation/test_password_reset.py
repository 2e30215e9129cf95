"""Password reset by email: Django's views in the site's layout, a link that works once."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import authenticate
from django.core import mail
from django.test import RequestFactory

from tests.factories import UserFactory

NEW_PASSWORD = "a-brand-new-passphrase-42"
LINK = re.compile(r"https?://[^/\s]+(/accounts/reset/[^/\s]+/[^/\s]+/)")


@pytest.fixture
def nora(db):
    return UserFactory(username="nora", email="nora@example.com")


def ask_for_a_link(client, email: str):
    return client.post("/accounts/password-reset/", {"email": email})


def test_the_login_page_offers_a_reset(client, db):
    page = client.get("/accounts/login/").content.decode()

    assert 'href="/accounts/password-reset/"' in page


def test_the_reset_form_is_in_the_site_layout(client, db):
    page = client.get("/accounts/password-reset/").content.decode()

    assert "Reset your password" in page
    assert 'class="topbar"' in page
    assert "for 60 minutes" in page


def test_a_reset_link_sent_by_email_sets_a_new_password_once(client, nora):
    response = ask_for_a_link(client, "nora@example.com")

    assert response.status_code == 302
    assert response["Location"] == "/accounts/password-reset/sent/"
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert message.to == ["nora@example.com"]
    assert message.subject == "Set a new password for the Inference Release Ledger"
    link = LINK.search(message.body)
    assert link, message.body

    # The token leaves the URL for the session at once.
    landing = client.get(link.group(1))
    assert landing.status_code == 302
    assert landing["Location"].endswith("/set-password/")
    form = client.get(landing["Location"])
    assert "Set a new password" in form.content.decode()

    done = client.post(
        landing["Location"], {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD}
    )

    assert done["Location"] == "/accounts/reset/done/"
    request = RequestFactory().post("/accounts/login/")
    assert authenticate(request, username="nora", password=NEW_PASSWORD) is not None
    # Used once: the same link no longer works.
    again = client.get(link.group(1), follow=True).content.decode()
    assert "This link does not work" in again


def test_mismatched_passwords_are_named_next_to_the_field(client, nora):
    ask_for_a_link(client, "nora@example.com")
    path = LINK.search(mail.outbox[0].body).group(1)
    form_url = client.get(path)["Location"]

    response = client.post(
        form_url, {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD + "x"}
    )

    page = response.content.decode()
    assert response.status_code == 200
    assert "error-summary" in page
    assert "The two password fields didn" in page


def test_an_unknown_address_is_answered_the_same_and_sent_nothing(client, nora):
    response = ask_for_a_link(client, "nobody@example.com")

    assert response["Location"] == "/accounts/password-reset/sent/"
    assert mail.outbox == []


def test_a_made_up_link_says_it_does_not_work(client, nora):
    page = client.get("/accounts/reset/MQ/abc-0123456789abcdef/", follow=True).content.decode()

    assert "This link does not work" in page
    assert 'href="/accounts/password-reset/"' in page
