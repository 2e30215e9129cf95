"""The gray rollout: stages from the plan, observations judged and stored, and the
verbs that move it — promote, hold, abort, close — each refusing what its state or
the asker's permission does not allow, with no Event when it refuses."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone

from ledger import queries as ledger_queries
from ledger.models import Event
from releases.governance import services
from releases.governance.services import TransitionRefused
from releases.models import Observation, Release, Stage
from tests.releases.factories import GOOD_STAGES, file_release, observe, roll_out

pytestmark = pytest.mark.django_db

GOOD = {"requests": 1200, "ttft_p95_ms": 640, "error_rate_pct": 0.2, "json_valid_pct": 99.5}
SLOW = {**GOOD, "ttft_p95_ms": 1400}


@pytest.fixture
def rolling(release, owner, signers):
    return roll_out(release, owner, signers)


def stage(release, number) -> Stage:
    return Stage.objects.get(release=release, number=number)


def after_window(release) -> dt.datetime:
    current = Stage.objects.get(release=release, state__in=Stage.ACTIVE_STATES)
    return current.started_at + dt.timedelta(minutes=current.observation_minutes, seconds=1)


def actions(release) -> list[str]:
    return list(
        Event.objects.filter(subject_type="releases.release", subject_id=str(release.pk))
        .order_by("sequence")
        .values_list("action", flat=True)
    )


def test_starting_the_rollout_copies_the_plan_into_stages_and_starts_the_first(rolling):
    stages = list(rolling.stages.order_by("number"))
    assert [float(s.traffic_pct) for s in stages] == [5, 25, 100]
    assert [s.state for s in stages] == ["observing", "pending", "pending"]
    assert stages[0].started_at is not None and stages[0].started_by is not None
    assert {g["metric"] for g in stages[0].guards} == {
        "ttft_p95_ms",
        "error_rate_pct",
        "structured_error_rate_pct",
    }
    assert actions(rolling)[-2:] == ["release.rollout_started", "release.stage_started"]


def test_a_passing_observation_is_stored_with_every_guard_judged(rolling, sre):
    observation = observe(rolling, sre, GOOD, baseline={"requests": 20000, "ttft_p95_ms": 600})
    assert observation.verdict == "pass"
    assert {r["metric"]: r["status"] for r in observation.guard_results} == {
        "ttft_p95_ms": "pass",
        "error_rate_pct": "pass",
        "structured_error_rate_pct": "pass",
    }
    assert observation.baseline == {"requests": 20000, "ttft_p95_ms": 600}
    assert stage(rolling, 1).state == "observing"
    event = Event.objects.filter(action="release.observation_recorded").latest("sequence")
    assert event.payload_data["verdict"] == "pass"


def test_failures_within_the_budget_block_promotion_and_one_more_breaches(rolling, sre):
    observe(rolling, sre, SLOW)
    first = stage(rolling, 1)
    assert first.state == "observing"
    assert "failure budget of 1 used" in first.state_reason
    with (
        time_machine.travel(after_window(rolling)),
        pytest.raises(TransitionRefused, match="Wait for a passing observation"),
    ):
        services.promote_release(rolling, actor=sre)
    observe(rolling, sre, SLOW)
    first.refresh_from_db()
    assert first.state == "breached"
    assert "2 failed observations" in first.state_reason
    assert "release.stage_breached" in actions(rolling)
    before = Event.objects.count()
    with (
        time_machine.travel(after_window(rolling)),
        pytest.raises(TransitionRefused, match=r"is breached .*roll back, or abort"),
    ):
        services.promote_release(rolling, actor=sre)
    assert Event.objects.count() == before


def test_a_critical_guard_breaches_the_stage_on_its_first_failure(world, owner, signers, sre):
    stages = [dict(s) for s in GOOD_STAGES]
    stages[0] = {
        **stages[0],
        "guards": {**stages[0]["guards"], "ttft_p95_ms": {"max": 900, "critical": True}},
        "failure_limit": 5,
    }
    release = roll_out(file_release(world, owner, gray_stages=stages), owner, signers)
    observe(release, sre, SLOW)
    assert stage(release, 1).state == "breached"
    assert "critical guard failed" in stage(release, 1).state_reason


def test_an_inconclusive_observation_holds_the_stage_for_a_person(rolling, sre):
    observe(rolling, sre, {"requests": 40})  # nothing measured
    held = stage(rolling, 1)
    assert held.state == "held"
    assert held.held_by is None
    assert "release.stage_held" in actions(rolling)
    # A person looks and promotes anyway once the window has passed.
    with time_machine.travel(after_window(rolling)):
        services.promote_release(rolling, actor=sre, note="traffic too thin overnight; fine")
    assert stage(rolling, 1).state == "promoted"
    assert stage(rolling, 2).state == "observing"


def test_a_later_passing_observation_releases_an_automatic_hold_but_not_a_persons(rolling, sre):
    observe(rolling, sre, {"requests": 40})
    observe(rolling, sre, GOOD)
    assert stage(rolling, 1).state == "observing"
    services.hold_release(rolling, actor=sre, reason="waiting for the tenant's go-ahead")
    observe(rolling, sre, GOOD)
    held = stage(rolling, 1)
    assert (held.state, held.held_by, held.state_reason) == (
        "held",
        sre,
        "waiting for the tenant's go-ahead",
    )


def test_promotion_waits_for_the_observation_window_except_on_the_emergency_path(
    rolling, sre, owner
):
    observe(rolling, sre, GOOD)
    with pytest.raises(
        TransitionRefused, match=r"observation window of stage 1 ends at .*only the emergency path"
    ):
        services.promote_release(rolling, actor=sre)
    Release.objects.filter(pk=rolling.pk).update(path="emergency", emergency_reason="OOM")
    services.promote_release(rolling, actor=sre)
    assert stage(rolling, 2).state == "observing"


def test_a_stage_with_guards_and_no_observation_is_not_promoted(rolling, sre):
    with (
        time_machine.travel(after_window(rolling)),
        pytest.raises(TransitionRefused, match="has guards but no observation yet"),
    ):
        services.promote_release(rolling, actor=sre)


def test_promoting_to_100_percent_releases_and_makes_the_candidate_live(world, rolling, sre):
    observe(rolling, sre, GOOD)
    with time_machine.travel(after_window(rolling)):
        services.promote_release(rolling, actor=sre)
    observe(rolling, sre, GOOD)
    with time_machine.travel(after_window(rolling)):
        services.promote_release(rolling, actor=sre)
        rolling.refresh_from_db()
        world.service.refresh_from_db()
        assert rolling.state == "released"
        assert rolling.close_code == "successful"
        assert rolling.closed_at is not None
        assert world.service.live_revision_id == world.candidate.pk
        assert [s.state for s in rolling.stages.order_by("number")] == [
            "promoted",
            "promoted",
            "completed",
        ]
        serving = ledger_queries.serving_at(world.service, timezone.now())
    assert serving is not None
    assert serving.revision_id == world.candidate.pk
    assert serving.cause == {"release": rolling.pk}
    assert actions(rolling)[-2:] == ["release.stage_started", "release.released"]


def test_a_release_that_saw_a_failed_observation_closes_successful_with_issues(rolling, sre):
    observe(rolling, sre, SLOW)
    observe(rolling, sre, GOOD)
    Release.objects.filter(pk=rolling.pk).update(path="emergency", emergency_reason="OOM")
    services.promote_release(rolling, actor=sre)
    observe(rolling, sre, GOOD)
    services.promote_release(rolling, actor=sre)
    rolling.refresh_from_db()
    assert (rolling.state, rolling.close_code) == ("released", "successful_with_issues")


def test_abort_takes_the_candidate_off_and_keeps_the_live_revision(world, rolling, sre):
    services.abort_release(rolling, actor=sre, reason="the tenant asked to wait a quarter")
    rolling.refresh_from_db()
    world.service.refresh_from_db()
    assert (rolling.state, rolling.close_code) == ("aborted", "failed")
    assert world.service.live_revision_id == world.live.pk
    assert stage(rolling, 1).state == "aborted"
    assert stage(rolling, 1).ended_by == sre
    with pytest.raises(TransitionRefused, match="is aborted; only a rolling out release"):
        services.abort_release(rolling, actor=sre, reason="again")


def test_promote_and_abort_need_the_promote_permission_hold_and_observe_the_team(
    rolling, owner, auditor, outsider, sre
):
    before = Event.objects.count()
    for person in (owner, auditor):
        with pytest.raises(PermissionDenied, match="promote permission"):
            services.promote_release(rolling, actor=person)
        with pytest.raises(PermissionDenied, match="promote permission"):
            services.abort_release(rolling, actor=person, reason="no")
    with pytest.raises(PermissionDenied, match="can post observations"):
        observe(rolling, auditor, GOOD)
    with pytest.raises(PermissionDenied, match="can hold"):
        services.hold_release(rolling, actor=outsider, reason="stop")
    assert Event.objects.count() == before
    observe(rolling, owner, GOOD)
    services.hold_release(rolling, actor=owner, reason="the tenant reports odd answers")
    assert stage(rolling, 1).held_by == owner


def test_a_bad_observation_is_refused_naming_the_field_and_writes_nothing(rolling, sre):
    before = (Event.objects.count(), Observation.objects.count())
    with pytest.raises(ValidationError) as bad_key:
        observe(rolling, sre, {"ttft_p95": 300})
    assert bad_key.value.message_dict["candidate"][0].startswith(
        "candidate: Additional properties are not allowed ('ttft_p95' was unexpected)."
    )
    with pytest.raises(ValidationError) as bad_rate:
        observe(rolling, sre, {"error_rate_pct": 140})
    assert bad_rate.value.message_dict["candidate"][0].startswith(
        "candidate.error_rate_pct: 140 is greater than the maximum of 100."
    )
    with pytest.raises(ValidationError, match="candidate_ttft_ms\\[1\\]: expected a latency"):
        observe(rolling, sre, {}, candidate_ttft_ms=[10, "fast"])
    with pytest.raises(ValidationError, match="Stage 2 is not carrying traffic; stage 1 is"):
        observe(rolling, sre, GOOD, stage_number=2)
    later = timezone.now() + dt.timedelta(hours=1)
    with pytest.raises(ValidationError, match="The window ends in the future"):
        services.record_observation(
            rolling,
            actor=sre,
            window_start=later - dt.timedelta(minutes=5),
            window_end=later,
            candidate=GOOD,
        )
    assert (Event.objects.count(), Observation.objects.count()) == before


def test_raw_latencies_are_judged_and_kept(world, owner, signers, sre):
    stages = [dict(s) for s in GOOD_STAGES]
    stages[0] = {
        **stages[0],
        "guards": {**stages[0]["guards"], "ttft_p95_ms": {"max_increase_pct": 20}},
    }
    release = roll_out(file_release(world, owner, gray_stages=stages), owner, signers)
    candidate = [700.0 + i for i in range(40)]
    baseline = [500.0 + i for i in range(40)]
    observation = observe(release, sre, {}, candidate_ttft_ms=candidate, baseline_ttft_ms=baseline)
    assert observation.verdict == "fail"
    ttft = next(r for r in observation.guard_results if r["metric"] == "ttft_p95_ms")
    assert ttft["status"] == "fail"
    assert "Mann-Whitney U p = " in ttft["why"]
    assert observation.candidate_ttft_ms == candidate


def test_histogram_buckets_are_validated_judged_and_kept(world, owner, signers, sre):
    stages = [dict(s) for s in GOOD_STAGES]
    stages[0] = {
        **stages[0],
        "guards": {**stages[0]["guards"], "ttft_p95_ms": {"max_increase_pct": 20}},
    }
    release = roll_out(file_release(world, owner, gray_stages=stages), owner, signers)
    with pytest.raises(ValidationError) as bad:
        observe(release, sre, {"ttft_buckets": [[0.1, 3], ["inf", 9]]})
    assert bad.value.message_dict["candidate"][0].startswith("candidate.ttft_buckets[1][0]:")
    live = [[0.1, 5], [0.25, 45], [0.5, 245], [1, 365], [2.5, 405], ["+Inf", 412]]
    slower = [[0.1, 0], [0.25, 0], [0.5, 5], [1, 45], [2.5, 245], ["+Inf", 412.4]]
    observation = observe(
        release,
        sre,
        {"ttft_p95_ms": 2400, "ttft_buckets": slower},
        baseline={"ttft_p95_ms": 1100, "ttft_buckets": live},
    )
    ttft = next(r for r in observation.guard_results if r["metric"] == "ttft_p95_ms")
    assert ttft["status"] == "fail"
    assert "candidate slower than baseline: Mann-Whitney on 6 shared buckets" in ttft["why"]
    assert observation.candidate["ttft_buckets"] == slower


def test_observations_are_posted_only_while_rolling_out(release, sre):
    with pytest.raises(
        TransitionRefused, match="is draft; only a rolling out release can be observed"
    ):
        observe(release, sre, GOOD)


def test_close_code_and_incidents_of_a_finished_release(rolling, sre, outsider):
    services.abort_release(rolling, actor=sre, reason="p95 TTFT doubled")
    services.close_release(
        rolling,
        actor=sre,
        close_code="rolled_back",
        note="traffic withdrawn after 12 min",
        incidents=[{"ticket": "INC-4412", "url": "https://tickets.example.com/INC-4412"}],
    )
    rolling.refresh_from_db()
    assert rolling.close_code == "rolled_back"
    assert rolling.incidents == [
        {"ticket": "INC-4412", "url": "https://tickets.example.com/INC-4412"}
    ]
    event = Event.objects.filter(action="release.closed").latest("sequence")
    assert event.payload_data["before"]["close_code"] == "failed"
    with pytest.raises(ValidationError, match=r"incidents\[0\]\.url: expected an http"):
        services.close_release(
            rolling,
            actor=sre,
            close_code="failed",
            incidents=[{"ticket": "X", "url": "javascript:1"}],
        )
    with pytest.raises(ValidationError, match="'great' is not a close code"):
        services.close_release(rolling, actor=sre, close_code="great")
    with pytest.raises(PermissionDenied):
        services.close_release(rolling, actor=outsider, close_code="failed")


def test_an_unfinished_release_has_no_close_code_to_set(rolling, sre):
    with pytest.raises(
        TransitionRefused, match="is rolling out; only a released or aborted or rolled back"
    ):
        services.close_release(rolling, actor=sre, close_code="successful")
