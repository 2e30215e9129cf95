"""Replay pages, through the client: backends, their probe, schedules, trends and runs."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from ledger.engines import Engine
from ledger.models import Event
from replay import services
from replay.models import Backend, Probe, Run, Schedule
from tests.replay.factories import SampleFactory
from tests.replay.helpers import SECRET, finish, make_backend, run_with_results
from tests.support.charts import chart_specs


@pytest.fixture
def backend(team):
    return make_backend(team)


# ---------------------------------------------------------------- backend list


def test_backend_list_shows_each_backend_with_its_revision_probe_and_last_run(
    client, auditor, backend
):
    Probe.objects.create(
        backend=backend,
        fingerprint=backend.revision.fingerprint,
        started_at=timezone.now(),
        reachable=True,
        drift=[{"what": "max_context", "registered": 32768, "reported": 8192}],
    )
    run = finish(run_with_results(backend))
    client.force_login(auditor)

    response = client.get("/replay/")

    page = response.content.decode()
    assert response.status_code == 200
    assert "kb-vllm" in page
    assert f"{backend.revision.service.slug} r{backend.revision.number}" in page
    assert ">drift</span>" in page
    assert f">run {run.pk}</a>" in page
    assert "Register a backend" not in page  # auditors read only


def test_backend_list_filters_in_the_url_and_pages(client, auditor, team):
    for n in range(26):
        make_backend(team, name=f"vllm-{n:02d}")
    make_backend(team, name="sglang-a", engine=Engine.SGLANG)
    client.force_login(auditor)

    first = client.get("/replay/", {"engine": "vllm"})
    sglang = client.get("/replay/", {"engine": "sglang"})

    assert first.context["page"].paginator.count == 26
    assert len(first.context["page"].object_list) == 25
    assert 'href="?engine=vllm&amp;page=2"' in first.content.decode()
    assert [b.name for b in sglang.context["page"].object_list] == ["sglang-a"]


def test_backend_list_query_count_does_not_grow_with_backends(
    client, auditor, team, django_assert_num_queries
):
    for n in range(3):
        backend = make_backend(team, name=f"b-{n}")
        finish(run_with_results(backend))
    client.force_login(auditor)
    client.get("/replay/")  # warm the session and the user's roles

    # session, user, the user's roles (may they register one?), count, the page of
    # backends with their latest probe and run (subqueries)
    with django_assert_num_queries(5):
        client.get("/replay/")


def test_backend_list_htmx_filter_answers_only_the_results(client, auditor, backend):
    client.force_login(auditor)

    response = client.get("/replay/", {"q": "kb"}, headers={"HX-Request": "true"})

    page = response.content.decode()
    assert "<html" not in page
    assert "kb-vllm" in page
    assert response["HX-Push-Url"] == "/replay/?q=kb"
    assert "HX-Request" in response["Vary"]


def test_backend_list_empty_state_says_what_to_do(client, owner, team, auditor):
    client.force_login(owner)
    assert "Register the first one" in client.get("/replay/").content.decode()
    client.force_login(auditor)
    assert "Model owners register them" in client.get("/replay/").content.decode()


# ---------------------------------------------------------------- backend page


def test_backend_page_names_the_credential_variable_never_its_value(
    client, auditor, backend, monkeypatch
):
    monkeypatch.setenv("LEDGER_BACKEND_KEY_KB", SECRET)
    client.force_login(auditor)

    page = client.get(f"/replay/backends/{backend.name}/").content.decode()

    assert "set via env <code>LEDGER_BACKEND_KEY_KB</code>" in page
    assert SECRET not in page


def test_backend_page_without_credential_says_none(client, auditor, team):
    backend = make_backend(team, name="open", credential_env="")
    client.force_login(auditor)

    page = client.get(f"/replay/backends/{backend.name}/").content.decode()

    assert "<dt>Credential</dt><dd>none</dd>" in page


def test_backend_page_links_revision_and_service_and_shows_limits(client, auditor, backend):
    client.force_login(auditor)
    service = backend.revision.service

    page = client.get(f"/replay/backends/{backend.name}/").content.decode()

    assert f'href="/services/{service.slug}/"' in page
    assert f'href="/services/{service.slug}/r{backend.revision.number}/"' in page
    assert "<code>http://127.0.0.1:9</code>" in page
    assert "<code>gemma-3-270m</code>" in page
    assert "at most 4 requests in flight" in page
    assert "first token 30 s" in page
    assert "live revision" in page


def test_backend_page_shows_the_latest_probe_with_its_drift_flags(client, auditor, backend):
    Probe.objects.create(
        backend=backend,
        fingerprint=backend.revision.fingerprint,
        started_at=timezone.now() - dt.timedelta(days=1),
        reachable=True,
    )
    Probe.objects.create(
        backend=backend,
        fingerprint=backend.revision.fingerprint,
        started_at=timezone.now(),
        reachable=True,
        served_models=[{"id": "other-model", "max_context": 8192}],
        max_context=8192,
        engine_version="0.11.0",
        drift=[
            {"what": "served_model", "registered": "gemma-3-270m", "reported": "other-model"},
            {"what": "max_context", "registered": 32768, "reported": 8192},
        ],
        capability_results={
            "structured_output": {
                "status": "failed",
                "checks": [
                    {
                        "name": "json_schema",
                        "passed": False,
                        "expected": "JSON valid against the schema",
                        "got": "$: 'city' is a required property",
                    }
                ],
            },
            "tool_calling": {"status": "not_probed", "why": "tool calling is not declared"},
        },
    )
    client.force_login(auditor)

    page = client.get(f"/replay/backends/{backend.name}/").content.decode()

    assert '<span class="badge bad">drift</span> served_model' in page
    assert '<code>32768</code></td><td data-label="Reported"><code>8192</code>' in page
    assert "<code>other-model</code>" in page
    assert "$: &#x27;city&#x27; is a required property" in page
    assert "not probed" in page


def test_backend_page_never_probed_tells_owner_to_probe(client, owner, backend):
    client.force_login(owner)

    page = client.get(f"/replay/backends/{backend.name}/").content.decode()

    assert "Never probed." in page
    assert "Probe now" in page


def test_backend_page_draws_the_trend_with_the_same_numbers_in_a_table(client, auditor, backend):
    now = timezone.now()
    finish(run_with_results(backend, ttft=100.0), at=now - dt.timedelta(hours=2))
    finish(run_with_results(backend, ttft=200.0, failing=0), at=now - dt.timedelta(hours=1))
    client.force_login(auditor)

    response = client.get(f"/replay/backends/{backend.name}/")

    page = response.content.decode()
    [spec] = chart_specs(page)
    assert len(spec["data"]) >= 2
    assert "vendor/plotly-basic-" in page
    assert "cdn.plot.ly" not in page
    rows = response.context["trend_rows"]
    assert [row["pass_rate_pct"] for row in rows] == [75.0, 100.0]
    assert [row["ttft_p50_ms"] for row in rows] == [100.5, 201.0]
    assert "75.0 %" in page and "100.0 %" in page
    assert "201.0 ms" in page


def test_backend_page_without_runs_has_no_chart_and_says_why(client, owner, backend):
    client.force_login(owner)

    page = client.get(f"/replay/backends/{backend.name}/").content.decode()

    assert chart_specs(page) == []
    assert "vendor/plotly-basic-" not in page
    assert "No finished run yet" in page


def test_backend_page_offers_run_now_to_owners_only(client, owner, auditor, sre, backend):
    SampleFactory()
    url = f"/replay/backends/{backend.name}/"

    client.force_login(owner)
    owner_page = client.get(url).content.decode()
    client.force_login(sre)
    sre_page = client.get(url).content.decode()
    client.force_login(auditor)
    auditor_page = client.get(url).content.decode()

    assert f'action="/replay/backends/{backend.name}/run"' in owner_page
    assert f'action="/replay/backends/{backend.name}/run"' in sre_page
    assert '/run"' not in auditor_page
    assert "Probe now" not in auditor_page
    assert "Add a schedule" not in auditor_page


def test_backend_page_of_unknown_backend_is_404(client, auditor, db):
    client.force_login(auditor)
    assert client.get("/replay/backends/nope/").status_code == 404


def test_backend_page_needs_login(client, backend):
    response = client.get(f"/replay/backends/{backend.name}/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


# ---------------------------------------------------------------- run now, probe now


def test_owner_runs_a_set_now_and_lands_on_the_queued_run(client, owner, backend):
    sample = SampleFactory()
    client.force_login(owner)

    response = client.post(
        f"/replay/backends/{backend.name}/run", {"sample_set": sample.sample_set.pk}
    )

    run = Run.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/replay/runs/{run.pk}/"
    assert (run.backend, run.sample_set, run.state, run.trigger) == (
        backend,
        sample.sample_set,
        Run.State.QUEUED,
        Run.Trigger.MANUAL,
    )
    assert run.requested_by == owner
    assert Event.objects.filter(action="replay.run_queued", actor=owner).exists()


def test_run_now_refused_by_the_domain_explains_why(client, owner, team):
    backend = make_backend(team, name="off", enabled=False)
    sample = SampleFactory()
    client.force_login(owner)

    response = client.post(
        f"/replay/backends/{backend.name}/run", {"sample_set": sample.sample_set.pk}, follow=True
    )

    assert not Run.objects.exists()
    assert "Run not started: off is disabled" in response.content.decode()


@pytest.mark.parametrize("who", ["auditor", "outsider", "business"])
def test_run_now_is_refused_to_people_who_cannot_operate_the_backend(client, request, backend, who):
    sample = SampleFactory()
    client.force_login(request.getfixturevalue(who))

    response = client.post(
        f"/replay/backends/{backend.name}/run", {"sample_set": sample.sample_set.pk}
    )

    assert response.status_code == 403
    assert not Run.objects.exists()


@pytest.mark.parametrize("action", ["run", "probe"])
def test_run_now_and_probe_now_accept_only_post(client, owner, backend, action):
    client.force_login(owner)
    assert client.get(f"/replay/backends/{backend.name}/{action}").status_code == 405


def test_owner_probes_a_backend_and_sees_the_drift(client, owner, team, fake):
    fake.configure(model="another-model")
    backend = make_backend(team, name="probed", base_url=fake.base_url, credential_env="")
    client.force_login(owner)

    response = client.post(f"/replay/backends/{backend.name}/probe", follow=True)

    probe = Probe.objects.get(backend=backend)
    page = response.content.decode()
    assert response.redirect_chain[-1][0] == f"/replay/backends/{backend.name}/#probe-heading"
    assert probe.reachable
    assert {flag["what"] for flag in probe.drift} == {"served_model", "engine_version"}
    assert "drift flag(s) raised" in page
    assert "<code>another-model</code>" in page


@pytest.mark.parametrize("who", ["auditor", "outsider"])
def test_probe_now_is_refused_to_readers(client, request, backend, who):
    client.force_login(request.getfixturevalue(who))

    assert client.post(f"/replay/backends/{backend.name}/probe").status_code == 403
    assert not Probe.objects.exists()


# ---------------------------------------------------------------- backend forms


def backend_data(revision, **overrides):
    data = {
        "name": "kb-sglang",
        "revision": revision.pk,
        "base_url": "http://10.0.0.7:30000",
        "model_name": "qwen2.5-7b-instruct",
        "engine": "sglang",
        "credential_env": "LEDGER_BACKEND_KEY_KB_SGLANG",
        "concurrency_limit": 16,
        "connect_timeout_s": 5,
        "first_token_timeout_s": 30,
        "idle_timeout_s": 30,
        "total_timeout_s": 300,
        "enabled": "on",
    }
    data.update(overrides)
    return data


def test_owner_registers_a_backend(client, owner, backend):
    client.force_login(owner)

    response = client.post("/replay/backends/new", backend_data(backend.revision))

    created = Backend.objects.get(name="kb-sglang")
    assert response.status_code == 302
    assert response["Location"] == "/replay/backends/kb-sglang/"
    assert created.credential_env == "LEDGER_BACKEND_KEY_KB_SGLANG"
    assert Event.objects.filter(action="replay.backend_created", actor=owner).exists()


def test_backend_form_shows_the_domain_refusal_beside_the_field(client, owner, backend):
    client.force_login(owner)

    response = client.post(
        "/replay/backends/new", backend_data(backend.revision, credential_env=SECRET)
    )

    page = response.content.decode()
    assert response.status_code == 200
    assert not Backend.objects.filter(name="kb-sglang").exists()
    assert 'id="error-summary"' in page
    assert 'id="id_credential_env_error"' in page
    assert "never the key itself" in page


def test_owner_edits_a_backend(client, owner, backend):
    client.force_login(owner)
    data = backend_data(backend.revision, name=backend.name, concurrency_limit=32)

    response = client.post(f"/replay/backends/{backend.name}/edit", data)

    backend.refresh_from_db()
    assert response.status_code == 302
    assert backend.concurrency_limit == 32
    assert Event.objects.filter(action="replay.backend_updated").exists()


@pytest.mark.parametrize("who", ["auditor", "outsider"])
def test_backend_forms_are_refused_to_readers(client, request, backend, who):
    client.force_login(request.getfixturevalue(who))
    data = backend_data(backend.revision)

    assert client.get("/replay/backends/new").status_code == 403
    assert client.post("/replay/backends/new", data).status_code == 403
    assert client.get(f"/replay/backends/{backend.name}/edit").status_code == 403
    assert client.post(f"/replay/backends/{backend.name}/edit", data).status_code == 403
    assert Backend.objects.count() == 1


# ---------------------------------------------------------------- schedules


@pytest.fixture
def schedule(backend):
    SampleFactory(sample_set__name="kb-smoke")
    return services.create_schedule(
        actor=None, backend=backend, sample_set_name="kb-smoke", crontab="0 */6 * * *"
    )


def test_backend_page_lists_schedules_with_crontab_and_next_run(client, auditor, schedule):
    client.force_login(auditor)

    response = client.get(f"/replay/backends/{schedule.backend.name}/")

    page = response.content.decode()
    row = response.context["schedules"][0]
    assert "<code>0 */6 * * *</code>" in page
    assert row.next_run is not None
    assert row.next_run.hour % 6 == 0 and row.next_run.minute == 0
    assert row.next_run > timezone.now()
    assert (
        f'<time datetime="{row.next_run.isoformat()}' in page
        or row.next_run.strftime("%Y-%m-%d %H:%M") in page
    )
    assert ">enabled</span>" in page


def test_owner_creates_a_schedule(client, owner, backend):
    SampleFactory(sample_set__name="kb-smoke")
    client.force_login(owner)

    response = client.post(
        f"/replay/backends/{backend.name}/schedules/new",
        {"sample_set_name": "kb-smoke", "crontab": "30 2 * * 1-5", "purpose": "regular"},
    )

    schedule = Schedule.objects.select_related("periodic_task__crontab").get()
    assert response.status_code == 302
    assert response["Location"] == f"/replay/backends/{backend.name}/#schedules-heading"
    assert schedule.periodic_task.crontab.hour == "2"
    assert schedule.periodic_task.crontab.day_of_week == "1-5"
    assert Event.objects.filter(action="replay.schedule_created", actor=owner).exists()


def test_schedule_form_names_the_bad_crontab_field(client, owner, backend):
    SampleFactory(sample_set__name="kb-smoke")
    client.force_login(owner)

    response = client.post(
        f"/replay/backends/{backend.name}/schedules/new",
        {"sample_set_name": "kb-smoke", "crontab": "0 25 * * *", "purpose": "regular"},
    )

    page = response.content.decode()
    assert response.status_code == 200
    assert not Schedule.objects.exists()
    assert 'id="id_crontab_error"' in page
    assert "Field 2 (hour)" in page
    assert 'value="0 25 * * *"' in page  # the value is kept


def test_owner_edits_a_schedules_crontab(client, owner, schedule):
    client.force_login(owner)

    form = client.get(f"/replay/schedules/{schedule.pk}/edit").content.decode()
    response = client.post(
        f"/replay/schedules/{schedule.pk}/edit", {"crontab": "15 * * * *", "enabled": "on"}
    )

    schedule.periodic_task.refresh_from_db()
    assert 'value="0 */6 * * *"' in form
    assert response.status_code == 302
    assert schedule.periodic_task.crontab.minute == "15"
    assert Event.objects.filter(action="replay.schedule_updated").exists()


def test_disabling_a_schedule_with_htmx_swaps_its_row(client, owner, schedule):
    client.force_login(owner)

    response = client.post(
        f"/replay/schedules/{schedule.pk}/toggle", headers={"HX-Request": "true"}
    )

    page = response.content.decode()
    schedule.periodic_task.refresh_from_db()
    assert response.status_code == 200
    assert page.strip().startswith(f'<tr id="schedule-{schedule.pk}">')
    assert ">disabled</span>" in page
    assert ">Enable</button>" in page
    assert "not while disabled" in page
    assert not schedule.periodic_task.enabled


def test_enabling_a_schedule_without_htmx_goes_back_to_the_backend(client, owner, schedule):
    services.update_schedule(schedule, actor=None, enabled=False)
    client.force_login(owner)

    response = client.post(f"/replay/schedules/{schedule.pk}/toggle")

    schedule.periodic_task.refresh_from_db()
    assert response.status_code == 302
    assert schedule.periodic_task.enabled


def test_deleting_a_schedule_asks_first_and_says_what_happens(client, owner, schedule):
    client.force_login(owner)

    confirm = client.get(f"/replay/schedules/{schedule.pk}/delete")
    assert Schedule.objects.exists()
    response = client.post(f"/replay/schedules/{schedule.pk}/delete")

    assert "Runs it already made, and their results, stay." in confirm.content.decode()
    assert ">Delete schedule</button>" in confirm.content.decode()
    assert response.status_code == 302
    assert not Schedule.objects.exists()
    assert not PeriodicTask.objects.filter(task="replay_scheduled").exists()
    assert Event.objects.filter(action="replay.schedule_deleted", actor=owner).exists()


@pytest.mark.parametrize("who", ["auditor", "outsider"])
def test_schedule_changes_are_refused_to_readers(client, request, schedule, who):
    client.force_login(request.getfixturevalue(who))
    name = schedule.backend.name
    new = {"sample_set_name": "kb-smoke", "crontab": "0 * * * *", "purpose": "regular"}

    assert client.get(f"/replay/backends/{name}/schedules/new").status_code == 403
    assert client.post(f"/replay/backends/{name}/schedules/new", new).status_code == 403
    assert client.get(f"/replay/schedules/{schedule.pk}/edit").status_code == 403
    edit = {"crontab": "0 * * * *", "enabled": ""}
    assert client.post(f"/replay/schedules/{schedule.pk}/edit", edit).status_code == 403
    assert client.post(f"/replay/schedules/{schedule.pk}/toggle").status_code == 403
    assert client.get(f"/replay/schedules/{schedule.pk}/delete").status_code == 403
    assert client.post(f"/replay/schedules/{schedule.pk}/delete").status_code == 403
    schedule.periodic_task.refresh_from_db()
    assert schedule.periodic_task.enabled
    assert Schedule.objects.count() == 1


def test_schedule_toggle_accepts_only_post(client, owner, schedule):
    client.force_login(owner)
    assert client.get(f"/replay/schedules/{schedule.pk}/toggle").status_code == 405
