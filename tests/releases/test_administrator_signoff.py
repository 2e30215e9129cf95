"""A superuser who signs a role without holding it signs as an administrator: shown so wherever
the sign-off is, and separation of duties does not read "every required role approved"
(issue 27, item 5). The demo's model team signs through a second model owner, owner2."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.urls import reverse

from ledger.models import Event, Team
from ledger.roles import Role, has_role
from releases import permissions
from releases.audit.queries.change_record import change_record
from releases.models import Release, SignOff
from tests.factories import UserFactory
from tests.releases.factories import approve

pytestmark = pytest.mark.django_db


@pytest.fixture
def root(team):
    """A superuser in the service's team who holds no ledger role."""
    user = UserFactory(username="root-user", is_superuser=True, is_staff=True)
    team.members.add(user)
    return user


@pytest.fixture
def signed_by_root(release, owner, root, sre, security, business):
    return approve(
        release,
        owner,
        {
            "model_team": root,
            "platform": sre,
            "security_compliance": security,
            "business_owner": business,
        },
    )


def _duty(record, title: str):
    return next(check for check in record.duties if check.title == title)


def test_the_sign_off_records_that_it_was_given_as_an_administrator(signed_by_root, root):
    signoff = SignOff.objects.get(release=signed_by_root, role="model_team")
    assert signoff.signer == root
    assert signoff.as_administrator
    event = Event.objects.filter(action="release.signed_off").order_by("sequence").first()
    assert event.payload_data["as_administrator"] is True
    others = SignOff.objects.filter(release=signed_by_root).exclude(role="model_team")
    assert not any(s.as_administrator for s in others)


def test_separation_of_duties_does_not_read_every_role_approved(signed_by_root):
    record = change_record(signed_by_root)

    check = _duty(record, "Every required role approved")
    assert not check.held
    assert check.detail == (
        "Not by the roles themselves: root-user signed for model team as an administrator, "
        "without holding the model owner role."
    )
    assert not record.duties_held


def test_a_model_owner_of_the_team_reads_held(release, owner, signers):
    approved = approve(release, owner, signers)

    check = _duty(change_record(approved), "Every required role approved")
    assert check.held
    assert check.detail.startswith("Every required role approved: model team")
    assert not SignOff.objects.filter(as_administrator=True).exists()


def test_the_pages_and_the_api_show_an_administrators_sign_off(client, signed_by_root, auditor):
    client.force_login(auditor)

    detail = client.get(reverse("releases:release_detail", args=[signed_by_root.pk]))
    record = client.get(reverse("releases:change_record", args=[signed_by_root.pk]))

    for page in (detail, record):
        text = page.content.decode()
        row = text.split("root-user", 1)[1].split("</td>", 1)[0]
        assert "signed as administrator" in row
    record_text = record.content.decode()
    assert "not held" in record_text
    assert "root-user signed for model team as an administrator" in record_text
    data = client.get(f"/api/releases/{signed_by_root.pk}/").json()
    model_team = next(s for s in data["signoffs"] if s["role"] == "model_team")
    assert model_team["as_administrator"] is True


# ---------------------------------------------------------------- the demo


def test_the_demo_has_a_second_model_owner_who_signs_for_the_model_team():
    call_command("seed_demo", "--quiet-logins", stdout=io.StringIO())

    users = get_user_model().objects
    owner2, owner = users.get(username="owner2"), users.get(username="owner")
    assert owner2.check_password("demo")
    assert has_role(owner2, Role.MODEL_OWNER) and not owner2.is_superuser
    model_teams = Team.objects.filter(members=owner)
    assert model_teams.exists()
    assert set(model_teams) <= set(Team.objects.filter(members=owner2))
    # Every demo sign-off for the model team is owner2's, none an administrator's.
    model_team = SignOff.objects.filter(role="model_team")
    assert model_team.exists()
    assert set(model_team.values_list("signer__username", flat=True)) == {"owner2"}
    assert not SignOff.objects.filter(as_administrator=True).exists()
    # And owner2 holds what signing the model team of every release owner filed needs.
    filed = Release.objects.filter(filed_by=owner).select_related("service__team")
    assert filed.exists()
    assert all(permissions.holds_signer_role(owner2, r, "model_team") for r in filed)
