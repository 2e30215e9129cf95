"""What was serving at T includes a gray rollout's candidate and its share, read from the
event chain: each stage below 100 % opens a share, the release's next rollout event
closes it; after 100 % the candidate is the live revision, not a share."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.utils import timezone

from ledger import queries as ledger_queries
from ledger.models import Event
from releases.governance import services
from releases.models import Stage
from tests.releases.factories import observe, roll_out
from tests.releases.test_api import client_for

pytestmark = pytest.mark.django_db

GOOD = {"requests": 1200, "ttft_p95_ms": 640, "error_rate_pct": 0.2, "json_valid_pct": 99.5}


def _after_window(release) -> dt.datetime:
    current = Stage.objects.get(release=release, state__in=Stage.ACTIVE_STATES)
    return current.started_at + dt.timedelta(minutes=current.observation_minutes, seconds=1)


def _promote_later(release, sre) -> dt.datetime:
    observe(release, sre, GOOD)
    moment = _after_window(release)
    with time_machine.travel(moment):
        services.promote_release(release, actor=sre)
    return moment


def _times(release, action: str) -> list[dt.datetime]:
    return list(
        Event.objects.filter(
            subject_type="releases.release", subject_id=str(release.pk), action=action
        )
        .order_by("sequence")
        .values_list("created_at", flat=True)
    )


@pytest.fixture
def history(world, release, owner, signers, sre):
    """Stage 1 at 5 %, promoted to stage 2 at 25 %, then to 100 %: the chain's moments
    of the first stage's start, the promotion to the second, and the release."""
    rolling = roll_out(release, owner, signers)
    second = _promote_later(rolling, sre)
    with time_machine.travel(second + dt.timedelta(seconds=1)):
        rolling.refresh_from_db()
        _promote_later(rolling, sre)
    started = _times(rolling, "release.stage_started")[0]
    promoted_to_second = _times(rolling, "release.promoted")[0]
    (released,) = _times(rolling, "release.released")
    return rolling, started, promoted_to_second, released


def test_each_stage_below_100_percent_is_a_share_at_its_moment(world, history):
    release, started, second, released = history
    service = world.service

    first = ledger_queries.shares_at(service, started + dt.timedelta(seconds=1))
    assert [(s.revision_id, s.traffic_pct, s.cause) for s in first] == [
        (world.candidate.pk, 5.0, {"release": release.pk, "stage": 1})
    ]
    assert first[0].since == started
    assert first[0].until == second

    middle = ledger_queries.shares_at(service, second + dt.timedelta(seconds=2))
    assert [(s.traffic_pct, s.cause["stage"]) for s in middle] == [(25.0, 2)]
    assert middle[0].until == _times(release, "release.promoted")[1]

    assert ledger_queries.shares_at(service, started - dt.timedelta(seconds=1)) == []
    after = released + dt.timedelta(seconds=1)
    assert ledger_queries.shares_at(service, after) == []
    assert ledger_queries.serving_at(service, after).revision_id == world.candidate.pk


def test_the_history_lists_the_shares_newest_first(world, history):
    release, started, second, _released = history

    shares = ledger_queries.share_history(world.service)

    stage_two_started = _times(release, "release.stage_started")[1]
    promoted_to_full = _times(release, "release.promoted")[1]
    assert [(s.traffic_pct, s.since, s.until) for s in shares] == [
        (25.0, stage_two_started, promoted_to_full),
        (5.0, started, second),
    ]


def test_an_aborted_rollout_closes_its_share(world, release, owner, signers, sre):
    rolling = roll_out(release, owner, signers)
    services.abort_release(rolling, actor=sre, reason="the tenant asked to wait")

    assert ledger_queries.shares_at(world.service, timezone.now()) == []
    (share,) = ledger_queries.share_history(world.service)
    assert share.until is not None


def test_the_serving_api_names_the_candidate_and_its_share(world, release, owner, signers, sre):
    rolling = roll_out(release, owner, signers)

    body = client_for(sre).get(f"/api/services/{world.service.slug}/serving/").json()

    assert body["revision"]["id"] == world.live.pk
    assert body["shares"] == [
        {
            "revision_id": world.candidate.pk,
            "revision": world.candidate.label,
            "traffic_pct": 5.0,
            "since": body["shares"][0]["since"],
            "until": None,
            "cause": {"release": rolling.pk, "stage": 1},
            "event": body["shares"][0]["event"],
        }
    ]
    assert body["shares"][0]["since"].endswith("Z") or "+00:00" in body["shares"][0]["since"]


def test_the_serving_pages_show_the_candidates_share(client, world, release, owner, signers):
    roll_out(release, owner, signers)
    client.force_login(owner)
    stage = f"stage 1 of release #{release.pk}"

    history = client.get(f"/services/{world.service.slug}/serving/").content.decode()
    service_page = client.get(f"/services/{world.service.slug}/").content.decode()
    at_now = client.get(
        f"/services/{world.service.slug}/serving/", {"at": timezone.now().isoformat()}
    ).content.decode()

    for page in (history, service_page, at_now):
        assert f"<strong>{world.candidate.label}</strong></a> carried 5 % of the traffic" in page
        assert stage in page
    chinese = client.get(
        f"/services/{world.service.slug}/serving/", HTTP_ACCEPT_LANGUAGE="zh-CN"
    ).content.decode()
    assert "的第 1 阶段" in chinese


def test_the_serving_api_reads_a_constant_number_of_queries(
    world, release, owner, signers, sre, django_assert_num_queries
):
    rolling = roll_out(release, owner, signers)
    client = client_for(sre)
    url = f"/api/services/{world.service.slug}/serving/"
    client.get(url)  # the token's first use is written down; not the one measured
    observe(rolling, sre, {"requests": 900, "ttft_p95_ms": 600})
    # 1 the token and its user, 2 the service (its row only: no catalog joins or
    # filters), 3 the change that opened the interval and 4 the one that closed it,
    # 5 the revision; the rollout's shares: 6 and 7 its stage events, 8 its release.
    with django_assert_num_queries(8):
        response = client.get(url, {"at": timezone.now().isoformat()})
    assert response.status_code == 200
    assert response.json()["shares"][0]["cause"] == {"release": rolling.pk, "stage": 1}
