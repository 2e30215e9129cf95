"""A failure sample kept as a risk the business accepts needs the business owner's
sign-off on every tier and path (issue 34, §6.15)."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from releases import policy
from releases.governance import gates, services
from releases.governance.queries.waiting import waiting_for
from tests.releases.factories import build_world, file_release, replay_run

pytestmark = pytest.mark.django_db


def _failing(world):
    return replay_run(
        world.sample_set,
        world.candidate_backend,
        baseline=world.live_run,
        below_budget=["refund-policy"],
    )


def _accepting(world) -> list[dict]:
    return [
        {
            "sample_set": world.sample_set.name,
            "sample": "refund-policy",
            "classification": "risk_accepted",
            "note": "the old answer was wrong too; support reviews refunds by hand",
        }
    ]


@pytest.mark.parametrize(
    ("tier", "without", "with_risk"),
    [
        ("experimental", (), ("business_owner",)),
        ("internal", ("model_team", "platform"), ("model_team", "platform", "business_owner")),
    ],
)
def test_a_risk_accepted_adds_the_business_owner_on_every_tier(
    team, owner, tier, without, with_risk
):
    world = build_world(team, tier=tier, slug=f"{tier}-svc")
    _failing(world)
    plain = file_release(world, owner)
    assert gates.assess(plain).required_roles == without
    accepting = file_release(world, owner, failure_classifications=_accepting(world))
    assessment = gates.assess(accepting)
    assert assessment.required_roles == with_risk
    signoffs = assessment.gate("signoffs")
    assert signoffs is not None and signoffs["status"] == "pending"
    assert "business owner" in signoffs["reason"]


def test_the_standard_path_needs_the_business_owner_too():
    assert policy.required_signoffs("production", "standard", risk_accepted=True) == (
        "model_team",
        "business_owner",
    )
    assert policy.required_signoffs("production", "standard") == ("model_team",)


def test_the_business_owner_signs_an_internal_release_only_when_it_accepts_a_risk(
    team, owner, business
):
    world = build_world(team, tier="internal", slug="internal-svc")
    _failing(world)
    degrading = [
        {
            **_accepting(world)[0],
            "classification": "degradation",
            "degradation": "refunds go to a person",
        }
    ]
    plain = file_release(world, owner, summary="no risk", failure_classifications=degrading)
    accepting = file_release(world, owner, failure_classifications=_accepting(world))
    for release in (plain, accepting):
        services.submit_release(release, actor=owner)
    waiting, _count = waiting_for(business)
    assert [(a.release.pk, a.roles) for a in waiting] == [(accepting.pk, ("business_owner",))]
    with pytest.raises(ValidationError) as refused:
        services.sign_off(plain, actor=business, role="business_owner", decision="approve")
    assert refused.value.message_dict["role"] == [
        f"Release #{plain.pk} needs no business_owner sign-off (internal, normal path: "
        "model_team, platform)."
    ]
    services.sign_off(accepting, actor=business, role="business_owner", decision="approve")
    standing = [s.signoff.role for s in gates.assess(accepting).signoffs if s.standing]
    assert standing == ["business_owner"]
