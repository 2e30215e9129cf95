"""The rollout and rollbacks over REST, as the gateway, a pager integration and an SRE's
script use them, each with their own token."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from ledger.models import Event
from releases.models import Observation, RollbackEvent
from tests.releases.factories import approve, roll_out
from tests.releases.test_api import client_for

pytestmark = pytest.mark.django_db


def window() -> dict[str, str]:
    end = timezone.now()
    return {
        "window_start": (end - dt.timedelta(minutes=10)).isoformat(),
        "window_end": end.isoformat(),
    }


@pytest.fixture
def rolling(release, owner, signers):
    return roll_out(release, owner, signers)


def test_the_team_starts_the_rollout_and_reads_it(release, owner, signers):
    approve(release, owner, signers)
    response = client_for(owner).post(f"/api/releases/{release.pk}/start/")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert (body["state"], body["current_stage"], body["traffic_pct"]) == ("rolling_out", 1, 5.0)
    assert [s["state"] for s in body["stages"]] == ["observing", "pending", "pending"]
    assert body["rollback_minutes"] == 10
    assert body["earliest_full_at"] is not None
    again = client_for(owner).post(f"/api/releases/{release.pk}/start/")
    assert again.status_code == 409
    assert again.json()["detail"].startswith(f"Release #{release.pk} is rolling out;")


def test_the_gateway_posts_raw_latencies_and_gets_the_verdict(rolling, sre):
    response = client_for(sre).post(
        f"/api/releases/{rolling.pk}/stages/1/observations/",
        {
            **window(),
            "candidate": {"error_rate_pct": 0.1, "json_valid_pct": 100},
            "candidate_ttft_ms": [300.0 + i for i in range(50)],
            "baseline_ttft_ms": [290.0 + i for i in range(50)],
            "source": "gateway",
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["verdict"] == "pass"
    ttft = next(r for r in body["guard_results"] if r["metric"] == "ttft_p95_ms")
    assert ttft["value"] == pytest.approx(346.55)
    listed = client_for(sre).get(f"/api/releases/{rolling.pk}/stages/1/observations/").json()
    assert [o["id"] for o in listed["results"]] == [body["id"]]


def test_a_prometheus_poller_posts_histogram_buckets_and_they_are_kept(rolling, sre):
    buckets = [[0.1, 56], [0.5, 359], [2.5, 409], ["+Inf", 412.4]]
    response = client_for(sre).post(
        f"/api/releases/{rolling.pk}/stages/1/observations/",
        {
            **window(),
            "candidate": {"ttft_p95_ms": 640, "ttft_buckets": buckets, "error_rate_pct": 0.1},
            "baseline": {"ttft_p95_ms": 610, "ttft_buckets": buckets},
            "source": "prometheus",
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    assert Observation.objects.get().candidate["ttft_buckets"] == buckets
    refused = client_for(sre).post(
        f"/api/releases/{rolling.pk}/stages/1/observations/",
        {**window(), "candidate": {"ttft_buckets": [[0.1, 3], [0.5]]}},
        format="json",
    )
    assert refused.status_code == 400
    assert "candidate.ttft_buckets[1]" in refused.json()["candidate"][0]


def test_an_observation_of_another_stage_or_bad_numbers_is_refused(rolling, sre):
    api = client_for(sre)
    other = api.post(
        f"/api/releases/{rolling.pk}/stages/2/observations/",
        {**window(), "candidate": {"ttft_p95_ms": 300}},
        format="json",
    )
    assert other.status_code == 400
    assert other.json()["stage"] == [
        "Stage 2 is not carrying traffic; stage 1 is, and observations belong to it."
    ]
    negative = api.post(
        f"/api/releases/{rolling.pk}/stages/1/observations/",
        {**window(), "candidate_ttft_ms": [12, -3]},
        format="json",
    )
    assert negative.status_code == 400
    assert "candidate_ttft_ms" in negative.json()
    assert Observation.objects.count() == 0


def test_promote_hold_and_abort_need_the_promote_permission(rolling, owner, auditor, sre):
    for person in (owner, auditor):
        response = client_for(person).post(
            f"/api/releases/{rolling.pk}/promote/", {}, format="json"
        )
        assert response.status_code == 403, person
        assert "promote permission" in response.json()["detail"]
    refused = client_for(sre).post(f"/api/releases/{rolling.pk}/promote/", {}, format="json")
    assert refused.status_code == 409
    assert "has guards but no observation yet" in refused.json()["detail"]
    held = client_for(owner).post(
        f"/api/releases/{rolling.pk}/hold/", {"reason": "tenant asked"}, format="json"
    )
    assert held.status_code == 200
    assert held.json()["held"] is True
    aborted = client_for(sre).post(
        f"/api/releases/{rolling.pk}/abort/", {"reason": "not this week"}, format="json"
    )
    assert aborted.status_code == 200
    assert aborted.json()["state"] == "aborted"
    closed = client_for(sre).post(
        f"/api/releases/{rolling.pk}/close/",
        {"close_code": "failed", "incidents": [{"ticket": "INC-1", "url": "https://t.example/1"}]},
        format="json",
    )
    assert closed.status_code == 200, closed.json()


def test_a_pager_records_a_rollback_and_reads_it_back(world, rolling, sre):
    api = client_for(sre)
    response = api.post(
        "/api/services/kb-assistant/rollbacks/",
        {"reason": "errors at 9 % on the canary", "symptom": "stream_interruption"},
        format="json",
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["to_revision"] == {"id": world.live.pk, "label": world.live.label}
    assert body["release"] == rolling.pk
    assert body["symptom"] == "stream_interruption"
    assert body["duration_seconds"] is None
    listed = api.get("/api/services/kb-assistant/rollbacks/").json()
    assert [r["id"] for r in listed] == [body["id"]]
    incident = api.get("/api/services/kb-assistant/incident/").json()
    assert incident["rollout"] is None
    rollback = RollbackEvent.objects.get()
    assert Event.objects.filter(action="rollback.recorded", subject_id=str(rollback.pk)).exists()


def test_recording_a_rollback_over_the_api_needs_the_rollback_permission(world, rolling, owner):
    response = client_for(owner).post(
        "/api/services/kb-assistant/rollbacks/", {"reason": "slow"}, format="json"
    )
    assert response.status_code == 403
    assert not RollbackEvent.objects.exists()
    missing = client_for(owner).post(
        "/api/services/nope/rollbacks/", {"reason": "x"}, format="json"
    )
    assert missing.status_code == 404
    assert missing.json()["detail"] == "There is no service 'nope'."


def test_confirming_a_rollback_over_the_api(world, rolling, sre):
    world.live_backend.enabled = False
    world.live_backend.save(update_fields=["enabled"])
    api = client_for(sre)
    recorded = api.post(
        "/api/services/kb-assistant/rollbacks/", {"reason": "slow"}, format="json"
    ).json()
    assert recorded["state"] == "awaiting_confirmation"
    confirmed = api.post(
        f"/api/rollbacks/{recorded['id']}/confirm/",
        {"succeeded": True, "note": "p95 back to 600 ms"},
        format="json",
    )
    assert confirmed.status_code == 200, confirmed.json()
    assert confirmed.json()["state"] == "succeeded"
    assert confirmed.json()["duration_seconds"] >= 0


def test_the_incident_answer_holds_the_rollout_and_the_plan(world, rolling, sre):
    body = client_for(sre).get("/api/services/kb-assistant/incident/").json()
    assert body["rollout"] == {
        "release": rolling.pk,
        "to_revision": world.candidate.label,
        "stage": 1,
        "stages": 3,
        "traffic_pct": 5.0,
        "stage_state": "observing",
        "breached": False,
        "held": False,
        "why": "awaiting observations",
        "analysis": None,
    }
    rollback = body["rollback"]
    assert rollback["plan_release"] == rolling.pk
    assert (rollback["kind"], rollback["expected_minutes"]) == ("model", 10)
    assert rollback["trigger_conditions"] == ["p95 TTFT above 1200 ms for 10 min"]
    assert rollback["target"]["id"] == world.live.pk


def test_once_released_the_plan_targets_what_served_before_in_a_bounded_read(
    world, rolling, sre, django_assert_max_num_queries
):
    """While rolling out the target is the live revision the service row holds; once
    released it is the revision that served before, joined to the release's row."""
    from tests.releases.test_rollbacks import release_fully

    release_fully(rolling, sre)
    api = client_for(sre)
    # The incident's thirteen at most (releases/governance/queries/incident.py), less the revision
    # that served before (the release's plan names the target), and what the gateway should
    # be doing (the rendered config's reads and the backends' names: five at most).
    with django_assert_max_num_queries(18):
        body = api.get("/api/services/kb-assistant/incident/").json()
    assert body["live"]["id"] == world.candidate.pk
    assert body["rollout"] is None
    rollback = body["rollback"]
    assert rollback["plan_release"] == rolling.pk
    assert rollback["target"]["id"] == world.live.pk
    assert rollback["target"]["model"] == (
        f"{world.live.model_asset.name}@{world.live.model_asset.revision}"
    )
    assert body["health"]["reasons"][0]["backend"] == world.candidate_backend.name
