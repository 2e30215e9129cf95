"""A capacity change states the peak it is for; the peak_drill gate then needs a drill of
the candidate whose knee is at or above it (`releases/governance/gates/drill.py`)."""

from __future__ import annotations

import pytest
from django.utils import timezone

from releases import policy
from releases.governance import gates, services
from releases.models import Drill
from tests.releases.factories import build_world, file_release

pytestmark = pytest.mark.django_db


def _drill(revision, *, knee, ran_minutes_ago=10, state=Drill.State.RAN):
    drill = Drill.objects.create(
        name=f"peak at {knee}",
        revision=revision,
        mix=[{"task_type": "chat", "sample_set": 1, "weight": 1.0}],
        arrival={"type": "ramp", "stages": [{"duration_s": 60, "rate": 20}]},
        bounds={"chat": {"ttft_p95_ms": 800.0, "e2e_p95_ms": 4000.0}},
        seed=7,
        signers=["platform_sre"],
        state=state,
        results={"knee_rate": knee},
        ran_at=timezone.now() - timezone.timedelta(minutes=ran_minutes_ago),
    )
    drill.services.set([revision.service])
    return drill


def _capacity(world, owner, **form):
    release = file_release(world, owner)
    services.update_release(release, actor=owner, change_kind="capacity", **form)
    release.refresh_from_db()
    return release


def _gate(release):
    result = gates.assess(release).gate("peak_drill")
    assert result is not None
    return result


def test_only_capacity_changes_take_the_gate():
    assert "peak_drill" in policy.gates_for("production", "capacity")
    assert "peak_drill" in policy.gates_for("internal", "capacity")
    assert "peak_drill" not in policy.gates_for("production", "model_upgrade")
    assert "peak_drill" not in policy.gates_for("experimental", "capacity")


def test_a_production_capacity_change_must_state_its_peak(world, owner):
    release = _capacity(world, owner)
    result = _gate(release)
    assert result["status"] == "fail"
    assert "states the planned peak rate" in result["reason"]


def test_an_internal_one_without_a_peak_needs_no_drill(team, owner):
    world = build_world(team, tier="internal", slug="internal-kb")
    release = _capacity(world, owner)
    assert _gate(release)["status"] == "pass"


def test_no_drill_of_the_candidate_fails_and_says_how_to_plan_one(world, owner):
    _drill(world.live, knee=100)  # the live revision's drill proves nothing of the candidate
    release = _capacity(world, owner, planned_peak_rps=40)
    result = _gate(release)
    assert result["status"] == "fail"
    assert result["reason"].startswith(f"No drill of kb-assistant {world.candidate.label}")
    assert "40/s" in result["reason"] and "/drills/new/" in result["reason"]


def test_a_drill_whose_knee_is_below_the_peak_fails_naming_how_far_it_got(world, owner):
    short = _drill(world.candidate, knee=30)
    release = _capacity(world, owner, planned_peak_rps=40)
    result = _gate(release)
    assert result["status"] == "fail"
    assert f"Drill #{short.pk}" in result["reason"]
    assert "only up to 30/s; the planned peak is 40/s" in result["reason"]
    assert [e["id"] for e in result["evidence"]] == [short.pk]


def test_a_drill_at_or_above_the_peak_passes_and_is_cited(world, owner):
    _drill(world.candidate, knee=30, ran_minutes_ago=1)
    enough = _drill(world.candidate, knee=40, ran_minutes_ago=60, state=Drill.State.CONCLUDED)
    _drill(world.candidate, knee=None, ran_minutes_ago=2)
    release = _capacity(world, owner, planned_peak_rps=40)
    result = _gate(release)
    assert result["status"] == "pass"
    assert f"Drill #{enough.pk}" in result["reason"] and "at 40/s" in result["reason"]
    assert result["evidence"][0]["url"] == f"/drills/{enough.pk}/"


def test_a_planned_drill_does_not_count(world, owner):
    _drill(world.candidate, knee=50, state=Drill.State.PLANNED)
    release = _capacity(world, owner, planned_peak_rps=40)
    assert _gate(release)["reason"].startswith("No drill of")


def test_the_drills_take_one_query_for_any_number_of_releases(
    world, owner, team, django_assert_num_queries
):
    other = build_world(team, slug="other-kb")
    releases = [
        _capacity(world, owner, planned_peak_rps=40),
        _capacity(other, owner, planned_peak_rps=10),
    ]
    _drill(world.candidate, knee=50)
    _drill(other.candidate, knee=5)
    now = timezone.now()
    one_by_one = [gates.assess(r, now=now).gate("peak_drill")["status"] for r in releases]
    # The constant twelve of every assessment (test_gates), and the candidates' drills.
    with django_assert_num_queries(13):
        together = gates.assess_many(releases, now=now)
    assert [a.gate("peak_drill")["status"] for a in together] == one_by_one == ["pass", "fail"]


def test_a_peak_left_empty_keeps_the_snapshot_signers_approved(world, owner):
    release = file_release(world, owner)
    before = gates.assess(release).snapshot
    assert "planned_peak_rps" not in before["form"]
    services.update_release(release, actor=owner, planned_peak_rps=12.5)
    release.refresh_from_db()
    assert gates.assess(release).snapshot["form"]["planned_peak_rps"] == 12.5
