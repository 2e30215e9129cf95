"""Waiting for me: the releases awaiting a sign-off the person may give."""

from __future__ import annotations

import pytest

from releases import services
from releases.queries import waiting as queries

pytestmark = pytest.mark.django_db


def test_waiting_for_lists_what_each_signer_may_sign(
    release, owner, signers, django_assert_num_queries
):
    assert queries.waiting_for(signers["platform"]) == []
    services.submit_release(release, actor=owner)
    platform = queries.waiting_for(signers["platform"])
    assert [(a.release.pk, a.roles) for a in platform] == [(release.pk, ("platform",))]
    assert "rollback_plan" in platform[0].gates_of_interest
    assert queries.waiting_for(owner) == []  # the filer never
    services.sign_off(release, actor=signers["platform"], role="platform", decision="approve")
    assert queries.waiting_for(signers["platform"]) == []
    # the person's roles, their teams, the releases, their standing sign-offs
    with django_assert_num_queries(4):
        team = queries.waiting_for(signers["model_team"])
    assert [a.roles for a in team] == [("model_team",)]
