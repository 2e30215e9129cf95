"""Waivers: bounded per tier, owned by the role whose part of the release the gate is,
and never granted by whoever signs that role (issue 26, items 4 and 5).

Each attack of the issue is reproduced through the verb, the API and the page.
"""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.core.exceptions import PermissionDenied, ValidationError
from django.urls import reverse
from django.utils import timezone

from ledger import services as ledger_services
from ledger.models import Event
from releases import permissions, policy
from releases.governance import services
from releases.models import SignOff, Waiver
from tests.factories import UserFactory
from tests.releases.factories import build_world, file_release, replay_run
from tests.releases.test_api import client_for

pytestmark = pytest.mark.django_db

SOON = dt.timedelta(days=3)


def _waive(release, actor, gate, *, after=SOON, reason="re-measured on Monday"):
    return services.grant_waiver(
        release, actor=actor, gate=gate, reason=reason, expires_at=timezone.now() + after
    )


def _unlicensed(world) -> None:
    """The candidate's license is not approved: the license gate fails, and a waiver is
    for a gate that does not pass."""
    ledger_services.set_license_approval(
        world.candidate.model_asset, actor=None, approval="rejected", comment="terms not read"
    )


def _stamp(moment: dt.datetime) -> str:
    return f"{timezone.localtime(moment):%Y-%m-%d %H:%M %Z}"


@pytest.fixture
def security_two(db):
    """A second security & compliance person: the one who signs when the first waived."""
    return UserFactory(username="sue", roles=["security_compliance"])


# ---------------------------------------------------------------- 4. bounded per tier


def test_a_waiver_cannot_last_until_9999(world, release, sre):
    world.reports["short"].delete()
    events = Event.objects.count()
    now = timezone.now()
    with time_machine.travel(now, tick=False), pytest.raises(ValidationError) as caught:
        services.grant_waiver(
            release,
            actor=sre,
            gate="load_evidence",
            reason="forever",
            expires_at=dt.datetime(9999, 12, 31, 23, 59, tzinfo=dt.UTC),
        )
    assert caught.value.message_dict == {
        "expires_at": [
            "A waiver on a production service may last at most 14 days: until "
            f"{_stamp(now + dt.timedelta(days=14))}; 9999-12-31 23:59 UTC is later."
        ]
    }
    assert not Waiver.objects.exists()
    assert Event.objects.count() == events


def test_the_bound_is_the_tiers_from_settings_up_to_the_minute(team, owner, sre, settings):
    internal = build_world(team, tier="internal", slug="sql-agent")
    release = file_release(internal, owner)
    for measured in internal.reports.values():
        measured.delete()
    now = timezone.now()
    with time_machine.travel(now, tick=False):
        with pytest.raises(ValidationError, match="an internal service may last at most 30 days"):
            _waive(release, sre, "load_evidence", after=dt.timedelta(days=30, minutes=1))
        settings.WAIVER_MAX_DAYS = {**settings.WAIVER_MAX_DAYS, "internal": 2}
        with pytest.raises(ValidationError, match="an internal service may last at most 2 days"):
            _waive(release, sre, "load_evidence", after=dt.timedelta(days=2, minutes=1))
        waiver = _waive(release, sre, "load_evidence", after=dt.timedelta(days=2))
    assert waiver.expires_at == now + dt.timedelta(days=2)


def test_the_api_refuses_a_waiver_past_the_bound_with_a_400_naming_it(world, release, sre):
    world.reports["short"].delete()
    response = client_for(sre).post(
        f"/api/releases/{release.pk}/waivers/",
        {"gate": "load_evidence", "reason": "forever", "expires_at": "9999-12-31T23:59:00Z"},
        format="json",
    )
    assert response.status_code == 400
    (message,) = response.json()["expires_at"]
    assert message.startswith("A waiver on a production service may last at most 14 days: until ")
    assert not Waiver.objects.exists()


def test_the_form_names_the_bound_and_refuses_past_it_beside_the_field(
    client, owner, world, security
):
    release = file_release(world, owner, logging_policy={})
    client.force_login(security)
    page = client.get(reverse("releases:release_detail", args=[release.pk])).content.decode()
    assert "At most 14 days on this production service: until " in page

    response = client.post(
        reverse("releases:release_waiver", args=[release.pk]),
        {"gate": "logging_policy", "reason": "forever", "expires_at": "9999-12-31T23:59"},
    )
    assert response.status_code == 400
    errors = response.context["waiver_form"].errors
    assert errors["expires_at"][0].startswith(
        "A waiver on a production service may last at most 14 days: until "
    )
    assert not Waiver.objects.exists()


def test_the_release_page_shows_how_long_each_waiver_has_left(client, owner, world, security):
    release = file_release(world, owner, logging_policy={})
    waiver = _waive(release, security, "logging_policy", after=dt.timedelta(days=3, hours=1))
    client.force_login(owner)
    url = reverse("releases:release_detail", args=[release.pk])

    html = client.get(url).content.decode()
    waivers = html[html.index('id="waivers"') :]
    assert "3 days left" in waivers
    assert f'<time datetime="{timezone.localtime(waiver.expires_at).isoformat()}">' in waivers
    gate = html[html.index('id="gate-logging_policy"') :]
    assert "3 days left" in gate[: gate.index("</li>")]

    with time_machine.travel(waiver.expires_at + dt.timedelta(hours=5)):
        html = client.get(url).content.decode()
    waivers = html[html.index('id="waivers"') : html.index("</div>", html.index('id="waivers"'))]
    assert "expired" in waivers and "left" not in waivers
    assert 'data-gate="logging_policy" data-status="fail"' in html


@pytest.mark.parametrize(
    ("left", "words"),
    [
        (dt.timedelta(days=1, hours=2), "1 day left"),
        (dt.timedelta(hours=5, minutes=10), "5 h left"),
        (dt.timedelta(minutes=12, seconds=30), "12 min left"),
        (dt.timedelta(seconds=20), "1 min left"),
        (dt.timedelta(0), "expired"),
    ],
)
def test_time_left_reads_in_words(left, words):
    from releases.templatetags.release_format import time_left

    now = timezone.now()
    with time_machine.travel(now, tick=False):
        assert time_left(now + left).text == words


# ---------------------------------------------------------------- 5. each gate's owner


def test_every_waivable_gate_has_an_owning_role_that_signs_off():
    waivable = set(policy.GATES) - policy.NOT_WAIVABLE
    assert set(policy.WAIVER_OWNERS) == waivable
    # The model team is the filer's own: a gate is never set aside by the team that asks.
    assert set(policy.WAIVER_OWNERS.values()) <= {
        "platform",
        "security_compliance",
        "business_owner",
    }
    assert set(policy.WAIVER_OWNERS.values()) <= set(SignOff.Role.values)
    for gate in policy.NOT_WAIVABLE:
        assert policy.waiver_owner(gate) is None


def test_the_issues_gates_go_to_the_roles_it_names():
    owners = policy.WAIVER_OWNERS
    for gate in ("license", "provenance", "logging_policy"):
        assert owners[gate] == "security_compliance"
    for gate in ("load_evidence", "replay", "rollback_plan", "image_pinned", "gray_plan"):
        assert owners[gate] == "platform"
    assert owners["failures_classified"] == "business_owner"


def test_a_passing_gate_is_neither_offered_nor_waived(client, world, release, security):
    """One rule for the page and the verb (`gates.waiver_refusal`): a waiver is for a gate
    that does not pass; the verb names the gate by its title, the API answers 400."""
    client.force_login(security)
    page = client.get(reverse("releases:release_detail", args=[release.pk]))
    assert page.context["waiver_form"] is None
    with pytest.raises(ValidationError) as caught:
        _waive(release, security, "license")
    assert caught.value.message_dict == {
        "gate": [
            "The “License approved for the service's exposure” gate passes: a waiver is for "
            "a gate that does not pass."
        ]
    }
    answer = client_for(security).post(
        f"/api/releases/{release.pk}/waivers/",
        {
            "gate": "license",
            "reason": "ahead of time",
            "expires_at": (timezone.now() + SOON).isoformat(),
        },
        format="json",
    )
    assert answer.status_code == 400
    assert answer.json()["gate"] == [
        "The “License approved for the service's exposure” gate passes: a waiver is for "
        "a gate that does not pass."
    ]
    assert not Waiver.objects.exists()
    _unlicensed(world)
    offered = client.get(reverse("releases:release_detail", args=[release.pk]))
    assert dict(offered.context["waiver_form"].fields["gate"].choices).keys() == {"license"}
    assert _waive(release, security, "license").gate == "license"


def test_the_platform_sre_cannot_waive_the_license_gate(world, release, sre, security):
    """The attack: platform sets the license gate aside, then signs platform."""
    _unlicensed(world)
    events = Event.objects.count()
    with pytest.raises(PermissionDenied) as caught:
        _waive(release, sre, "license")
    assert str(caught.value) == (
        "Only security & compliance may waive the license gate: it is part of what that role "
        "signs off."
    )
    assert not Waiver.objects.exists()
    assert Event.objects.count() == events
    assert _waive(release, security, "license").granted_by == security


def test_only_the_business_owner_waives_task_fitness(world, release, sre, business):
    replay_run(
        world.sample_set,
        world.candidate_backend,
        baseline=world.live_run,
        below_budget=["refund-policy"],
    )
    with pytest.raises(PermissionDenied, match="Only business owner may waive"):
        _waive(release, sre, "failures_classified")
    assert _waive(release, business, "failures_classified").granted_by == business


def test_who_waived_a_gate_cannot_sign_the_role_that_owns_it(
    world, release, owner, security, security_two, sre
):
    _unlicensed(world)
    _waive(release, security, "license")
    services.submit_release(release, actor=owner)
    events = Event.objects.count()
    with pytest.raises(PermissionDenied) as caught:
        services.sign_off(release, actor=security, role="security_compliance", decision="approve")
    assert str(caught.value) == (
        "You waived the license gate of this release: someone else signs off for security & "
        "compliance, or you would approve your own waiver."
    )
    assert not SignOff.objects.exists()
    assert Event.objects.count() == events
    # Another role, and another person of the same role, may sign.
    services.sign_off(release, actor=sre, role="platform", decision="approve")
    services.sign_off(release, actor=security_two, role="security_compliance", decision="approve")
    assert SignOff.objects.count() == 2


def test_who_signed_a_role_cannot_then_waive_its_gates(world, release, owner, sre):
    services.submit_release(release, actor=owner)
    services.sign_off(release, actor=sre, role="platform", decision="approve")
    world.reports["short"].delete()
    with pytest.raises(PermissionDenied) as caught:
        _waive(release, sre, "load_evidence")
    assert str(caught.value) == (
        "You signed off for platform on this release: someone else waives its load_evidence "
        "gate, or you would approve your own waiver."
    )
    assert not Waiver.objects.exists()


def test_a_revoked_waiver_no_longer_stands_between_its_granter_and_the_role(
    world, release, owner, security
):
    _unlicensed(world)
    waiver = _waive(release, security, "license")
    services.revoke_waiver(waiver, actor=security, why="the license was approved after all")
    ledger_services.set_license_approval(
        world.candidate.model_asset, actor=None, approval="approved"
    )
    services.submit_release(release, actor=owner)
    services.sign_off(release, actor=security, role="security_compliance", decision="approve")
    assert SignOff.objects.get().signer == security


def test_a_superuser_who_waived_a_gate_does_not_sign_its_role(world, release, owner, team):
    root = UserFactory(username="root-user", is_superuser=True)
    _unlicensed(world)
    _waive(release, root, "license")
    services.submit_release(release, actor=owner)
    with pytest.raises(PermissionDenied, match="You waived the license gate"):
        services.sign_off(release, actor=root, role="security_compliance", decision="approve")
    team.members.add(root)
    services.sign_off(release, actor=root, role="model_team", decision="approve")


def test_the_filer_never_waives_even_holding_the_role(world, owner, team):
    filer = UserFactory(username="fay", roles=["model_owner", "security_compliance"])
    team.members.add(filer)
    release = file_release(world, filer)
    with pytest.raises(PermissionDenied, match="You filed this release"):
        _waive(release, filer, "license")


def test_the_api_refuses_a_waiver_of_another_roles_gate_with_a_403_naming_the_owner(
    world, release, sre
):
    response = client_for(sre).post(
        f"/api/releases/{release.pk}/waivers/",
        {
            "gate": "license",
            "reason": "x",
            "expires_at": (timezone.now() + SOON).isoformat(),
        },
        format="json",
    )
    assert response.status_code == 403
    assert response.json()["detail"].startswith("Only security & compliance may waive")
    assert not Waiver.objects.exists()


def test_the_api_shows_who_may_waive_each_gate(world, release, owner):
    body = client_for(owner).get(f"/api/releases/{release.pk}/").json()
    owners = {gate["key"]: gate["waivable_by"] for gate in body["gates"]}
    assert owners["license"] == "security_compliance"
    assert owners["load_evidence"] == "platform"
    assert owners["failures_classified"] == "business_owner"
    assert owners["signoffs"] is None and owners["risk"] is None


def test_the_page_shows_beside_each_waivable_gate_who_may_waive_it(client, owner, release):
    client.force_login(owner)
    html = client.get(reverse("releases:release_detail", args=[release.pk])).content.decode()

    def gate(key: str) -> str:
        start = html.index(f'id="gate-{key}"')
        return html[start : html.index("</li>", start)]

    assert "Waived only by security &amp; compliance." in gate("license")
    assert "Waived only by platform." in gate("load_evidence")
    assert "Waived only by business owner." in gate("failures_classified")
    assert "Waived only by" not in gate("risk")


def test_the_page_offers_each_waiver_only_to_its_owner_and_refuses_the_rest(
    client, owner, world, sre
):
    release = file_release(world, owner, logging_policy={})
    world.reports["short"].delete()
    client.force_login(sre)
    url = reverse("releases:release_detail", args=[release.pk])
    offered = dict(client.get(url).context["waiver_form"].fields["gate"].choices)
    assert "load_evidence" in offered and "logging_policy" not in offered

    response = client.post(
        reverse("releases:release_waiver", args=[release.pk]),
        {
            "gate": "logging_policy",
            "reason": "logging reviewed offline",
            "expires_at": (timezone.localtime() + SOON).strftime("%Y-%m-%dT%H:%M"),
        },
    )
    assert response.status_code == 403
    assert "Only security &amp; compliance may waive the logging_policy gate" in (
        response.content.decode()
    )
    assert not Waiver.objects.exists()


def test_the_page_offers_no_signoff_of_the_role_whose_gate_you_waived(
    client, owner, world, release, security
):
    _unlicensed(world)
    _waive(release, security, "license")
    services.submit_release(release, actor=owner)
    client.force_login(security)
    response = client.get(reverse("releases:release_detail", args=[release.pk]))
    assert response.context["signable_roles"] == []
    refused = client.post(
        reverse("releases:release_signoff", args=[release.pk]),
        {"role": "security_compliance", "decision": "approve"},
    )
    assert refused.status_code == 403
    assert not SignOff.objects.exists()


def test_the_page_and_the_verb_read_one_waiver_rule(world, release, owner, security, sre, business):
    """`waiver_refusal` with what the page read agrees with the one that reads itself."""
    services.submit_release(release, actor=owner)
    services.sign_off(release, actor=sre, role="platform", decision="approve")
    signoffs = list(release.signoffs.all())
    for person in (owner, security, sre, business):
        for gate in policy.WAIVER_OWNERS:
            assert permissions.waiver_refusal(
                person, release, gate, signoffs=signoffs
            ) == permissions.waiver_refusal(person, release, gate)
