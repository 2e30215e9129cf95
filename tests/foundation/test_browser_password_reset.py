"""A person who forgot their password sets a new one from the emailed link, in chromium."""

import re

import pytest
from playwright.sync_api import expect

from tests.factories import UserFactory

pytestmark = pytest.mark.browser

NEW_PASSWORD = "a-brand-new-passphrase-42"


def test_forgotten_password_is_reset_from_the_emailed_link(live_server, page, mailoutbox, db):
    UserFactory(username="nora", email="nora@example.com")

    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_role("link", name="Forgotten your password?").click()
    page.get_by_label("Email").fill("nora@example.com")
    page.get_by_role("button", name="Send the link").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Check your email")

    (message,) = mailoutbox
    link = re.search(r"https?://\S+/accounts/reset/\S+/", message.body).group(0)
    page.goto(link)
    # The token left the address bar for the session.
    expect(page).to_have_url(re.compile(r"/set-password/$"))
    page.get_by_label("New password", exact=True).fill(NEW_PASSWORD)
    page.get_by_label("New password confirmation").fill(NEW_PASSWORD)
    page.get_by_role("button", name="Set the password").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Your password is set")

    page.get_by_role("link", name="Log in").last.click()
    page.get_by_label("Username").fill("nora")
    page.get_by_label("Password").fill(NEW_PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("button", name="Log out")).to_be_visible()
