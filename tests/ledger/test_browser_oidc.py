"""Sign-in through the identity provider in a real browser: the ledger's login page, the
provider's own login page (django-oauth-toolkit on loopback), back with the roles and
teams the provider's groups map to; a group changed at the provider is applied at the next
sign-in; sign-out ends the provider's session too, so signing in again asks for the
password there; a person whose groups map to nothing is told whom to ask."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from ledger.models import Team
from ledger.oidc import discovery
from ledger.roles import Role, roles_of
from tests.support.oidc import CLIENT_SECRET, configure_ledger

pytestmark = pytest.mark.browser

LIVE_CLIENT_ID = "ledger-live"


@pytest.fixture(scope="session")
def live_client(oidc_provider, live_server):
    """The ledger registered at the provider for the live server's exact callback URL."""
    oidc_provider.client(LIVE_CLIENT_ID, CLIENT_SECRET, live_server.url)
    return oidc_provider


@pytest.fixture
def provider(settings, live_client):
    configure_ledger(settings, live_client, LIVE_CLIENT_ID)
    yield live_client
    discovery.forget()


def sign_in_at_provider(page, live_server, username: str, password: str) -> None:
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_role("link", name="Sign in with Acme SSO").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Test identity provider")
    page.get_by_label("Provider username").fill(username)
    page.get_by_label("Provider password").fill(password)
    page.get_by_role("button", name="Continue").click()


def test_a_person_signs_in_at_the_provider_is_resynced_and_signs_out_of_both(
    live_server, page, provider
):
    Team.objects.create(slug="platform", name="Platform")
    Team.objects.create(slug="kb-team", name="Knowledge base")
    provider.user("zoe", "provider-pass-z", ["ledger-sre"])

    sign_in_at_provider(page, live_server, "zoe", "provider-pass-z")

    expect(page.get_by_role("heading", level=1)).to_contain_text("Welcome")
    zoe = User.objects.get(username="zoe")
    assert roles_of(zoe) == [Role.PLATFORM_SRE]
    assert [team.slug for team in zoe.teams.all()] == ["platform"]

    # Moved to another team at the provider; signing out leaves the provider too, so the
    # next sign-in asks for the password there again and brings the new groups.
    provider.user("zoe", "provider-pass-z", ["kb-owners"])
    page.get_by_role("button", name="Log out").click()
    expect(page).to_have_url(f"{live_server.url}/accounts/login/")
    sign_in_at_provider(page, live_server, "zoe", "provider-pass-z")

    expect(page.get_by_role("heading", level=1)).to_contain_text("Welcome")
    zoe = User.objects.get(username="zoe")
    assert roles_of(zoe) == [Role.MODEL_OWNER]
    assert [team.slug for team in zoe.teams.all()] == ["kb-team"]


def test_a_person_with_no_mapped_group_is_told_whom_to_ask(live_server, page, provider):
    User.objects.create_superuser("root-admin", "root@example.com", "unused-password")
    provider.user("yann", "provider-pass-y", ["unmapped"])

    sign_in_at_provider(page, live_server, "yann", "provider-pass-y")

    expect(page.get_by_role("heading", level=1)).to_have_text("No role yet")
    expect(page.get_by_text("root@example.com")).to_be_visible()
    expect(page.get_by_text("ledger-sre")).to_be_visible()
