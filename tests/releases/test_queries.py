"""Waiting for me: the releases awaiting a sign-off the person may give."""

from __future__ import annotations

import pytest

from releases import services
from releases.queries import waiting as queries
from tests.releases.factories import file_release

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
