"""*Waiting for me* (`releases.governance.queries.waiting.waiting_for`, one bulk read for the whole fleet) is
pinned to `permissions.signoff_refusal`, the rule the sign-off verb and the release page
ask: over every kind of person and releases in several states, with roles already
signed, rejected or waived, a release is in a person's list, with exactly those roles,
iff it is open to signing and the rule lets them sign those of its roles nobody signed."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from releases import permissions
from releases.governance import gates, services
from releases.governance.queries.waiting import waiting_for
from releases.models import Release
from releases.transitions import Action
from tests.factories import UserFactory
from tests.ledger.factories import TeamFactory
from tests.releases.factories import approve, build_world, file_release

pytestmark = pytest.mark.django_db


def _expected(person, release: Release) -> set[str]:
    """The roles `person` may sign on `release` as the rule sees it: required, not
    signed (either way) by anyone, in a state that takes sign-offs."""
    release.refresh_from_db()
    if not release.allowed(Action.SIGN):
        return set()
    assessment = gates.assess(release)
    given = {s.signoff.role for s in assessment.signoffs if s.signoff.voided_at is None}
    return {
        role
        for role in assessment.required_roles
        if role not in given and permissions.signoff_refusal(person, release, role) is None
    }


def test_waiting_for_me_lists_what_signoff_refusal_lets_each_person_sign(
    team, owner, model_team_signer, sre, security, business, auditor, other_sre
):
    other_owner = UserFactory(username="otto", roles=["model_owner"])
    TeamFactory(slug="data-team", members=[other_owner])
    people = {
        "superuser": UserFactory(username="root-user", is_superuser=True),
        "filer": owner,
        "model owner of the team": model_team_signer,
        "owner of another team": other_owner,
        "sre": sre,
        "second sre": other_sre,
        "security": security,
        "business owner": business,
        "auditor": auditor,
        "outsider": UserFactory(username="nobody"),
    }
    later = timezone.now() + dt.timedelta(days=3)

    def release_on(slug: str, *, tier: str = "production", **fields) -> Release:
        return file_release(build_world(team, slug=slug, tier=tier), owner, **fields)

    draft = release_on("svc-draft")
    submitted = release_on("svc-submitted")
    services.submit_release(submitted, actor=owner)
    partly = release_on("svc-partly")
    services.submit_release(partly, actor=owner)
    services.sign_off(partly, actor=sre, role="platform", decision="approve")
    services.sign_off(partly, actor=model_team_signer, role="model_team", decision="approve")
    # Security waived a gate of its own: someone else signs security & compliance.
    waived = release_on("svc-waived", logging_policy={})
    services.grant_waiver(
        waived, actor=security, gate="logging_policy", reason="reviewed offline", expires_at=later
    )
    services.submit_release(waived, actor=owner)
    rejected = release_on("svc-rejected")
    services.submit_release(rejected, actor=owner)
    services.sign_off(
        rejected, actor=business, role="business_owner", decision="reject", comment="no"
    )
    approved = release_on("svc-approved")
    approve(
        approved,
        owner,
        {
            "model_team": model_team_signer,
            "platform": sre,
            "security_compliance": security,
            "business_owner": business,
        },
    )
    emergency = release_on("svc-emergency", path="emergency", emergency_reason="KV-cache OOM")
    services.submit_release(emergency, actor=owner)
    services.sign_off(emergency, actor=security, role="security_compliance", decision="approve")
    services.start_rollout(emergency, actor=owner)
    internal = release_on("svc-internal", tier="internal")
    services.submit_release(internal, actor=owner)
    releases = [draft, submitted, partly, waived, rejected, approved, emergency, internal]
    for release in releases:
        release.refresh_from_db()
    assert {r.state for r in releases} >= {
        "draft",
        "submitted",
        "rejected",
        "approved",
        "rolling_out",
    }

    listed_any = set()
    for kind, person in people.items():
        awaiting, count = waiting_for(person)
        listed = {a.release.pk: set(a.roles) for a in awaiting}
        assert count == len(awaiting), kind
        for release in releases:
            expected = _expected(person, release)
            assert listed.get(release.pk, set()) == expected, (kind, release.state, expected)
            if expected:
                listed_any.add((kind, release.pk))
    # The matrix is not empty on either side: people wait on releases, and the rule
    # refuses others (the filer, the auditor, the waiver's granter).
    assert ("model owner of the team", submitted.pk) in listed_any
    assert ("security", waived.pk) not in listed_any
    assert ("security", submitted.pk) in listed_any
    assert ("second sre", emergency.pk) in listed_any
    assert not any(kind in ("filer", "auditor", "outsider") for kind, _ in listed_any)
