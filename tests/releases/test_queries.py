"""Waiting for me: the releases awaiting a sign-off the person may give."""

from __future__ import annotations

import pytest

from releases.governance import services
from releases.governance.queries import waiting as queries
from tests.releases.factories import UNDECLARED, file_release

pytestmark = pytest.mark.django_db


def test_waiting_for_lists_what_each_signer_may_sign(
    release, owner, signers, django_assert_num_queries
):
    assert queries.waiting_for(signers["platform"]) == ([], 0)
    services.submit_release(release, actor=owner)
    platform, total = queries.waiting_for(signers["platform"])
    assert [(a.release.pk, a.roles) for a in platform] == [(release.pk, ("platform",))]
    assert total == 1
    assert "rollback_plan" in platform[0].gates_of_interest
    assert queries.waiting_for(owner) == ([], 0)  # the filer never
    services.sign_off(release, actor=signers["platform"], role="platform", decision="approve")
    assert queries.waiting_for(signers["platform"]) == ([], 0)
    # the person's roles, their teams, the releases, their standing sign-offs, the
    # releases listed and their revisions
    with django_assert_num_queries(6):
        team, _ = queries.waiting_for(signers["model_team"])
    assert [a.roles for a in team] == [("model_team",)]


def test_waiting_for_lists_the_first_few_and_counts_them_all(
    world, owner, signers, django_assert_num_queries
):
    filed = []
    for _ in range(4):
        release = file_release(world, owner)
        services.submit_release(release, actor=owner)
        filed.append(release)
    services.sign_off(filed[0], actor=signers["platform"], role="platform", decision="approve")
    services.sign_off(filed[1], actor=signers["model_team"], role="model_team", decision="approve")

    listed, total = queries.waiting_for(signers["platform"], limit=2)

    # The one the platform signer signed is not theirs to sign again; oldest first.
    assert [a.release.pk for a in listed] == [filed[1].pk, filed[2].pk]
    assert total == 3
    # Read as the gates read them: their revisions come with them.
    with django_assert_num_queries(0):
        assert listed[0].release.to_revision.runtime.name
    # A role signed by someone else is not asked of the next signer of that role.
    team, _ = queries.waiting_for(signers["model_team"])
    assert filed[1].pk not in [a.release.pk for a in team]


def test_waiting_for_follows_the_one_row_rule_over_people_and_releases(
    world, owner, team, signers, security, sre
):
    """The bulk list says what `signoff_refusal` says, release by release, for each kind
    of person: the filer, each role's signer, a second signer of a role whose gate the
    first waived, an administrator outside the team and one in it, people with no part."""
    import datetime as dt

    from django.utils import timezone

    from releases import permissions, policy
    from tests.factories import UserFactory

    people = {
        **signers,
        "filer": owner,
        "second_security": UserFactory(username="sue", roles=["security_compliance"]),
        "second_sre": UserFactory(username="pat", roles=["platform_sre"]),
        "root_outside": UserFactory(username="root-out", is_superuser=True),
        "root_inside": UserFactory(username="root-in", is_superuser=True),
        "auditor": UserFactory(username="ada", roles=["auditor"]),
    }
    team.members.add(people["root_inside"])
    soon = timezone.now() + dt.timedelta(days=3)
    plain = file_release(world, owner)
    # Two failing gates, waived: a security one by security, a platform one by root.
    waived = file_release(world, owner, logging_policy={}, metrics_declared=UNDECLARED)
    services.grant_waiver(
        waived, actor=security, gate="logging_policy", reason="x", expires_at=soon
    )
    services.grant_waiver(
        waived, actor=people["root_inside"], gate="metrics_coverage", reason="x", expires_at=soon
    )
    signed = file_release(world, owner)
    releases = [plain, waived, signed]
    for release in releases:
        services.submit_release(release, actor=owner)
    services.sign_off(signed, actor=sre, role="platform", decision="approve")

    for name, person in people.items():
        listed = {a.release.pk: set(a.roles) for a in queries.waiting_for(person)[0]}
        for release in releases:
            release.refresh_from_db()
            taken = {s.role for s in release.signoffs.filter(voided_at__isnull=True)}
            expected = {
                role
                for role in policy.required_signoffs(release.service.tier, release.path)
                if role not in taken and permissions.can_sign(person, release, role)
            }
            assert listed.get(release.pk, set()) == expected, (name, release.pk)
    # The rule has teeth here: whoever waived a gate is not asked to sign its role.
    assert "security_compliance" not in {
        r for a in queries.waiting_for(security)[0] if a.release == waived for r in a.roles
    }
