"""Sign-offs are frozen once their release is closed: what happens to its evidence
afterwards (a later verification of the rollback target failing, a new replay run)
voids none of them, and the change record shows what was standing when it went out."""

from __future__ import annotations

import pytest
from django.urls import reverse

from ledger.models import Event
from releases.governance import gates, services
from releases.models import SignOff
from replay.models import Run
from tests.releases.factories import file_release, observe, replay_run, roll_out

pytestmark = pytest.mark.django_db

GOOD = {"requests": 1200, "ttft_p95_ms": 640, "error_rate_pct": 0.2, "json_valid_pct": 99.5}


@pytest.fixture
def aborted(release, owner, signers, sre):
    release = roll_out(release, owner, signers)
    observe(release, sre, GOOD)
    services.abort_release(release, actor=sre, reason="the sales tenant saw 429s")
    release.refresh_from_db()
    assert release.state == "aborted"
    return release


def _fail_the_targets_verification(world) -> Run:
    """The rollback target (the revision live when filed) fails a later verification."""
    return replay_run(
        world.verification_set,
        world.live_backend,
        trigger=Run.Trigger.VERIFICATION,
        verdict=Run.Verdict.FAILED,
        below_budget=["v1"],
    )


def test_a_later_failed_verification_voids_no_signoff_of_an_aborted_release(
    world, aborted, client, auditor
):
    before = gates.assess(aborted)
    assert [s.standing for s in before.signoffs] == [True] * 4
    assert before.gate("rollback_plan")["status"] == "pass"

    _fail_the_targets_verification(world)
    assessment = gates.assess(aborted)
    assert assessment.gate("rollback_plan")["status"] == "fail"  # the gate reads what is now
    assert [(s.standing, s.void_reason) for s in assessment.signoffs] == [(True, "")] * 4

    services.revalidate_release(aborted)
    assert not SignOff.objects.filter(release=aborted, voided_at__isnull=False).exists()
    assert not Event.objects.filter(action="release.signoff_voided").exists()

    client.force_login(auditor)
    page = client.get(reverse("releases:change_record", args=[aborted.pk])).content.decode()
    assert "voided" not in page
    assert "went from pass to fail after you approved" not in page
    assert page.count('<span class="badge ok">approve</span>') == 4


def test_a_rolled_back_release_keeps_its_signoffs_as_they_stood(world, owner, signers, sre):
    # The emergency path may promote before a stage's observation window ends.
    release = file_release(world, owner, path="emergency", emergency_reason="a fix for INC-7")
    release = roll_out(release, owner, signers)
    while release.state == "rolling_out":
        observe(release, sre, GOOD)
        services.promote_release(release, actor=sre)
        release.refresh_from_db()
    assert release.state == "released"
    services.record_rollback(world.service, actor=sre, reason="errors at 4 %")
    release.refresh_from_db()
    assert release.state == "rolled_back"

    _fail_the_targets_verification(world)
    replay_run(world.sample_set, world.candidate_backend, baseline=world.live_run)
    services.revalidate_release(release)
    assert [s.standing for s in gates.assess(release).signoffs] == [True] * 4
    assert not SignOff.objects.filter(release=release, voided_at__isnull=False).exists()


def test_an_open_release_still_has_its_signoffs_voided_by_a_failed_verification(
    world, release, owner, signers
):
    from tests.releases.factories import approve

    release = approve(release, owner, signers)
    assert release.state == "approved"
    _fail_the_targets_verification(world)
    services.revalidate_release(release)
    release.refresh_from_db()
    assert release.state == "submitted"
    assert SignOff.objects.filter(release=release, voided_at__isnull=False).count() == 4
