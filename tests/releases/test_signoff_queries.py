"""A sign-off judges the release's gates once (issue 28 item 3): the assessment it
binds the sign-off to is judged again in memory, with the new sign-off, to decide
whether the release is approved. One assessment reads 9 queries here; before, a
sign-off read two (three when it voided one): 31 and 34 queries in these tests."""

from __future__ import annotations

import pytest

from releases.governance import services
from releases.models import Release

pytestmark = pytest.mark.django_db


def test_a_sign_off_reads_the_gates_once(release, owner, signers, django_assert_num_queries):
    services.submit_release(release, actor=owner)
    # The lock (1), who may sign (4 for the model team: roles, team, sign-offs, waivers),
    # the assessment (12, the price sheet of the cost_record gate and the revisions'
    # capabilities among them), the sign-off and its Event (8 with their savepoints).
    with django_assert_num_queries(25):
        services.sign_off(
            release, actor=signers["model_team"], role="model_team", decision="approve"
        )
    release.refresh_from_db()
    assert release.state == Release.State.SUBMITTED


def test_the_last_sign_off_approves_from_the_same_assessment(
    release, owner, signers, django_assert_num_queries
):
    services.submit_release(release, actor=owner)
    for role in ("model_team", "platform", "security_compliance"):
        services.sign_off(release, actor=signers[role], role=role, decision="approve")
    # As above less the team check, and the approval with its Event (4): no second
    # assessment.
    with django_assert_num_queries(28):
        services.sign_off(
            release, actor=signers["business_owner"], role="business_owner", decision="approve"
        )
    release.refresh_from_db()
    assert release.state == Release.State.APPROVED
    assert release.approved_at is not None
