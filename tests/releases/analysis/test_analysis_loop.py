"""The analysis loop against the database, with what needs no Prometheus: which stages are
due, one observation per window, a missing PROMETHEUS_URL as errors that hold the stage
(never a pass), a person pausing and resuming, and what the page and the API show."""

from __future__ import annotations

import datetime as dt

import pytest
from django.urls import reverse
from django.utils import timezone

from ledger.models import Event
from releases.analysis.services import pause_analysis, resume_analysis, run_tick
from releases.governance.services import TransitionRefused
from releases.models import Observation, Stage
from tests.releases.factories import GOOD_STAGES, file_release, roll_out

pytestmark = pytest.mark.django_db

ANALYSIS = {"source": "prometheus", "interval_s": 60, "consecutive_error_limit": 3}


def _analysed_plan(**analysis):
    stages = [dict(s) for s in GOOD_STAGES]
    stages[0]["analysis"] = {**ANALYSIS, **analysis}
    stages[0]["guards"] = {
        **stages[0]["guards"],
        "ttft_p95_ms": {"max": 900, "max_increase_pct": 50, "critical": True},
    }
    return stages


@pytest.fixture
def rolling(world, owner, signers, settings):
    settings.PROMETHEUS_URL = ""
    release = file_release(world, owner, gray_stages=_analysed_plan())
    return roll_out(release, owner, signers)


def _stage(release) -> Stage:
    return release.stages.get(number=1)


def _at(release, seconds: float) -> dt.datetime:
    stage = _stage(release)
    assert stage.started_at is not None
    return stage.started_at + dt.timedelta(seconds=seconds)


def test_the_stage_copies_the_plans_analysis_with_its_defaults(rolling):
    stage = _stage(rolling)

    assert stage.analysis == {
        "source": "prometheus",
        "interval_s": 60,
        "consecutive_error_limit": 3,
        "on_breach": "hold",  # production
        "auto_promote": False,
        "queries": {},
    }
    assert stage.error_limit == 100  # the analysis' own limit decides on errors


def test_nothing_is_due_before_the_first_interval_ends(rolling):
    assert run_tick(now=_at(rolling, 59)) == []
    assert not Observation.objects.filter(stage__release=rolling).exists()


def test_without_prometheus_a_tick_is_an_error_and_never_a_pass(rolling):
    [outcome] = run_tick(now=_at(rolling, 61))

    observation = Observation.objects.get(stage__release=rolling)
    assert (observation.verdict, observation.source, observation.analysis_window) == (
        "error",
        "prometheus",
        1,
    )
    assert observation.source_error == "PROMETHEUS_URL is not set: the analysis cannot measure"
    assert observation.posted_by is None
    assert outcome.verdict == "error" and outcome.action == ""
    stage = _stage(rolling)
    assert stage.state == Stage.State.HELD and stage.held_by is None  # the judge holds it
    assert stage.analysis_paused_at is None  # and the analysis goes on measuring


def test_one_observation_per_window_however_many_ticks(rolling):
    run_tick(now=_at(rolling, 61))
    again = run_tick(now=_at(rolling, 100))

    assert again == []
    assert Observation.objects.filter(stage__release=rolling).count() == 1


def test_errors_in_a_row_hold_the_stage_for_a_person_and_stop_the_analysis(rolling):
    for window in (1, 2):
        run_tick(now=_at(rolling, 60 * window + 1))
    assert _stage(rolling).analysis_paused_at is None

    [outcome] = run_tick(now=_at(rolling, 181))

    stage = _stage(rolling)
    assert outcome.action == "stop"
    assert stage.state == Stage.State.HELD and stage.held_by is None
    assert stage.state_reason.startswith("analysis stopped: 3 measurements in a row failed")
    assert stage.analysis_paused_at is not None and stage.analysis_paused_by is None
    assert stage.analysis_pause_reason.startswith("3 measurements in a row failed (the limit is 3)")
    acted = Event.objects.filter(action="release.analysis_acted", subject_id=str(rolling.pk)).get()
    assert acted.actor is None
    assert acted.payload_data["decided_by"] == "analysis"
    assert run_tick(now=_at(rolling, 241)) == []  # stopped: a person takes it from here
    rolling.refresh_from_db()
    assert rolling.state == "rolling_out"


def test_a_person_pauses_and_resumes_the_analysis(rolling, sre):
    pause_analysis(rolling, actor=sre, reason="Prometheus is being upgraded")

    assert run_tick(now=_at(rolling, 61)) == []
    with pytest.raises(TransitionRefused, match="already paused by"):
        pause_analysis(rolling, actor=sre, reason="again")

    resume_analysis(rolling, actor=sre)

    assert len(run_tick(now=_at(rolling, 62))) == 1
    actions = list(
        Event.objects.filter(subject_id=str(rolling.pk), action__startswith="release.analysis_")
        .order_by("pk")
        .values_list("action", flat=True)
    )
    assert actions == ["release.analysis_paused", "release.analysis_resumed"]


def test_a_paused_stage_shows_who_paused_it_and_offers_resume(client, rolling, sre):
    pause_analysis(rolling, actor=sre, reason="Prometheus is being upgraded")
    client.force_login(sre)

    page = client.get(reverse("releases:release_detail", args=[rolling.pk])).content.decode()

    assert f"Paused by {sre.get_username()}: Prometheus is being upgraded" in page
    assert reverse("releases:analysis_resume", args=[rolling.pk]) in page


def test_the_page_and_the_api_show_the_queries_to_paste(client, rolling, sre, world):
    client.force_login(sre)
    live = world.live_backend.model_name
    canary = world.candidate_backend.model_name

    page = client.get(reverse("releases:release_detail", args=[rolling.pk])).content.decode()
    api = client.get(f"/api/releases/{rolling.pk}/rollout/").json()

    expected = (
        "1000 * histogram_quantile(0.95, sum by (le) "
        f'(rate(vllm:time_to_first_token_seconds_bucket{{model_name="{canary}"}}[60s])))'
    )
    [analysis] = api["analysis"]
    assert analysis["queries"]["ttft_p95_ms"]["candidate"] == expected
    assert f'model_name="{live}"' in analysis["queries"]["ttft_p95_ms"]["baseline"]
    assert analysis["on_breach"] == "hold" and analysis["paused"] is False
    assert "Analysis from Prometheus" in page
    assert "histogram_quantile(0.95" in page


def test_pausing_is_for_whoever_may_hold(client, rolling, outsider):
    client.force_login(outsider)

    response = client.post(
        reverse("releases:analysis_pause", args=[rolling.pk]), {"reason": "mine now"}
    )

    assert response.status_code == 403
    assert _stage(rolling).analysis_paused_at is None


def test_the_incident_screen_says_when_the_analysis_measures_next_or_who_paused_it(
    client, rolling, sre
):
    client.force_login(sre)
    url = reverse("releases:incident", args=[rolling.service.slug])
    stage = _stage(rolling)

    running = client.get(url).content.decode()
    api = client.get(f"/api/services/{rolling.service.slug}/incident/").json()

    assert "analysis running" in running
    analysis = api["rollout"]["analysis"]
    assert analysis["interval_s"] == 60 and analysis["paused_by"] == ""
    next_at = dt.datetime.fromisoformat(analysis["next_at"])
    assert (next_at - stage.started_at).total_seconds() % 60 == 0
    assert next_at > stage.started_at

    pause_analysis(rolling, actor=sre, reason="taking over by hand")
    paused = client.get(url).content.decode()

    assert f"Paused by {sre.get_username()}: taking over by hand" in paused
    assert (
        client.get(f"/api/services/{rolling.service.slug}/incident/").json()["rollout"]["analysis"][
            "next_at"
        ]
        is None
    )


def test_the_release_page_lists_each_tick_with_its_verdict_and_action(client, rolling, sre):
    for window in (1, 2, 3):
        run_tick(now=_at(rolling, 60 * window + 1))
    client.force_login(sre)

    response = client.get(reverse("releases:release_detail", args=[rolling.pk]))

    ticks = response.context["ticks"]
    assert [(t.stage, t.verdict, t.action) for t in ticks] == [
        (1, "error", ""),
        (1, "error", ""),
        (1, "error", "stop"),
    ]
    assert response.context["analysis_chart"] is None  # nothing measured: nothing to draw
    page = response.content.decode()
    assert "Analysis timeline" in page and "stop the analysis" in page
    assert "PROMETHEUS_URL is not set" in page


def test_metrics_count_the_ticks_their_errors_and_the_automatic_actions(client, rolling):
    from tests.support.metrics import sample_value

    def scrape(client) -> str:
        return client.get("/metrics").content.decode()

    before = scrape(client)
    for window in (1, 2, 3):
        run_tick(now=_at(rolling, 60 * window + 1))
    after = scrape(client)

    def moved(name: str, **labels: str) -> float:
        return sample_value(after, name, **labels) - sample_value(before, name, **labels)

    assert moved("ledger_analysis_ticks_total", verdict="error") == 3
    assert moved("ledger_analysis_errors_total") == 3
    assert moved("ledger_analysis_actions_total", action="stop") == 1
    assert moved("ledger_analysis_actions_total", action="promote") == 0


def test_the_release_form_sets_a_stages_analysis_and_keeps_what_it_does_not_show(
    client, owner, world
):
    plan = _analysed_plan(interval_s=30)
    release = file_release(world, owner, gray_stages=plan)
    client.force_login(owner)
    url = reverse("releases:release_edit", args=[release.pk])
    form = client.get(url).context["form"]
    assert form["stage_0_analysis"].value() == "hold"  # production's default on a breach
    data = {bf.html_name: bf.value() for bf in form if bf.value() not in (None, [], "")}
    for name in ("impact_tenants", "impact_task_types", "required_sample_sets"):
        data[name] = form.fields[name].prepare_value(data.get(name) or [])
    data["rollback_triggers"] = "\n".join(release.rollback_triggers)
    data["stage_0_analysis"] = "rollback_promote"
    data["stage_1_analysis"] = "hold"

    response = client.post(url, data)

    assert response.status_code == 302, response.context["form"].errors
    release.refresh_from_db()
    first, second, last = release.gray_stages
    assert first["analysis"] == {
        **plan[0]["analysis"],
        "on_breach": "rollback",
        "auto_promote": True,
    }
    assert first["analysis"]["interval_s"] == 30  # set through the API, kept
    assert second["analysis"] == {
        "source": "prometheus",
        "on_breach": "hold",
        "auto_promote": False,
    }
    assert "analysis" not in last

    data["stage_0_analysis"] = ""
    client.post(url, data)
    release.refresh_from_db()
    assert "analysis" not in release.gray_stages[0]


def test_run_analysis_prints_what_it_measured_and_decided(rolling):
    from io import StringIO

    from django.core.management import call_command

    quiet = StringIO()
    call_command("run_analysis", stdout=quiet)
    assert quiet.getvalue() == "No stage with an analysis is due for a measurement.\n"

    Stage.objects.filter(pk=_stage(rolling).pk).update(
        started_at=timezone.now() - dt.timedelta(seconds=61)
    )
    said = StringIO()
    call_command("run_analysis", stdout=said)

    lines = said.getvalue().splitlines()
    assert lines[0] == f"release #{rolling.pk} ({rolling.service.slug}) stage 1 window 1: error"
    assert lines[1:3] == ["  candidate: nothing", "  baseline:  nothing"]


def test_a_tier_that_may_not_roll_back_by_itself_fails_the_plan(world, owner, monkeypatch):
    from releases import policy
    from releases.governance import gates

    release = file_release(world, owner, gray_stages=_analysed_plan(on_breach="rollback"))
    assert gates.assess(release).gate("gray_plan")["status"] == "pass"

    monkeypatch.setattr(policy, "ANALYSIS_MAY_ROLL_BACK", frozenset({"experimental"}))

    gate = gates.assess(release).gate("gray_plan")
    assert gate["status"] == "fail"
    assert (
        "stage 1's analysis may not roll back by itself on a production service" in gate["reason"]
    )


def test_a_ticks_queries_do_not_grow_with_the_stages(team, owner, signers, settings):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from tests.releases.factories import build_world

    settings.PROMETHEUS_URL = ""
    releases = []
    for slug in ("kb-one", "kb-two", "kb-three"):
        world = build_world(team, slug=slug)
        releases.append(
            roll_out(file_release(world, owner, gray_stages=_analysed_plan()), owner, signers)
        )
    ids = [r.pk for r in releases]

    def tick(count: int) -> int:
        Stage.objects.filter(release_id__in=ids[:count], number=1).update(
            started_at=timezone.now() - dt.timedelta(seconds=61 + 60 * count)
        )
        with CaptureQueriesContext(connection) as queries:
            outcomes = run_tick()
        assert len(outcomes) == count
        return len(queries.captured_queries)

    assert tick(1) == tick(3)
