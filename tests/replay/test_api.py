"""The replay REST API: backends, sample sets, runs and probes under /api/replay/."""

from __future__ import annotations

import json

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from ledger.engines import Engine
from ledger.models import Event
from replay.models import Backend, Probe, Run, SampleSet
from tests.replay.factories import SampleFactory, SampleSetFactory
from tests.replay.helpers import SECRET, finish, make_backend, run_with_results
from tests.replay.test_views_samplesets import JSONL


@pytest.fixture
def api():
    return APIClient()


@pytest.fixture
def backend(team):
    return make_backend(team)


def backend_payload(revision, **overrides):
    payload = {
        "name": "kb-sglang",
        "revision": revision.pk,
        "base_url": "http://10.0.0.7:30000",
        "model_name": "qwen2.5-7b-instruct",
        "engine": "sglang",
        "credential_env": "LEDGER_BACKEND_KEY_KB_SGLANG",
        "concurrency_limit": 16,
    }
    payload.update(overrides)
    return payload


# ---------------------------------------------------------------- access


def test_anonymous_callers_get_401_everywhere(api, backend):
    SampleFactory(sample_set__name="kb-smoke")
    for url in [
        "/api/replay/backends/",
        f"/api/replay/backends/{backend.name}/",
        f"/api/replay/backends/{backend.name}/probes/",
        "/api/replay/sample-sets/",
        "/api/replay/sample-sets/kb-smoke/",
        "/api/replay/sample-sets/kb-smoke@1/export/",
        "/api/replay/runs/",
    ]:
        assert api.get(url).status_code == 401, url
    assert api.post("/api/replay/runs/", {}, format="json").status_code == 401
    assert api.post("/api/replay/sample-sets/import/", {}, format="json").status_code == 401


def test_auditor_reads_every_list_and_detail(api, auditor, backend):
    run = finish(run_with_results(backend, sample_set=SampleSetFactory(name="kb-smoke")))
    api.force_authenticate(auditor)

    for url in [
        "/api/replay/backends/",
        f"/api/replay/backends/{backend.name}/",
        f"/api/replay/backends/{backend.name}/probes/",
        "/api/replay/sample-sets/",
        "/api/replay/sample-sets/kb-smoke@1/",
        "/api/replay/runs/",
        f"/api/replay/runs/{run.pk}/",
    ]:
        assert api.get(url).status_code == 200, url


def test_auditor_writes_nothing(api, auditor, backend):
    SampleFactory(sample_set__name="kb-smoke")
    api.force_authenticate(auditor)

    create = api.post("/api/replay/backends/", backend_payload(backend.revision), format="json")
    patch = api.patch(
        f"/api/replay/backends/{backend.name}/", {"concurrency_limit": 2}, format="json"
    )
    imported = api.post(
        "/api/replay/sample-sets/import/", {"name": "x", "jsonl": JSONL}, format="json"
    )
    started = api.post(
        "/api/replay/runs/", {"backend": backend.name, "sample_set": "kb-smoke"}, format="json"
    )

    assert [r.status_code for r in (create, patch, imported, started)] == [403, 403, 403, 403]
    assert Backend.objects.count() == 1
    assert not SampleSet.objects.filter(name="x").exists()
    assert not Run.objects.exists()


def test_owner_of_another_team_cannot_change_or_run_this_backend(api, backend):
    from tests.factories import UserFactory
    from tests.ledger.factories import TeamFactory

    stranger = UserFactory(username="mo", roles=["model_owner"])
    TeamFactory(slug="other-team", members=[stranger])
    SampleFactory(sample_set__name="kb-smoke")
    api.force_authenticate(stranger)

    patch = api.patch(
        f"/api/replay/backends/{backend.name}/", {"concurrency_limit": 2}, format="json"
    )
    started = api.post(
        "/api/replay/runs/", {"backend": backend.name, "sample_set": "kb-smoke"}, format="json"
    )

    assert (patch.status_code, started.status_code) == (403, 403)


# ---------------------------------------------------------------- backends


def test_backend_exposes_the_credential_variable_name_only(api, auditor, backend, monkeypatch):
    monkeypatch.setenv("LEDGER_BACKEND_KEY_KB", SECRET)
    api.force_authenticate(auditor)

    listed = api.get("/api/replay/backends/")
    detail = api.get(f"/api/replay/backends/{backend.name}/")

    assert listed.json()["results"][0]["credential_env"] == "LEDGER_BACKEND_KEY_KB"
    assert detail.json()["credential_env"] == "LEDGER_BACKEND_KEY_KB"
    assert SECRET not in listed.content.decode() + detail.content.decode()
    assert detail.json()["service"] == backend.revision.service.slug
    assert detail.json()["latest_probe"] is None


def test_owner_registers_a_backend_through_the_domain(api, owner, backend):
    api.force_authenticate(owner)

    response = api.post("/api/replay/backends/", backend_payload(backend.revision), format="json")

    assert response.status_code == 201, response.json()
    assert response.json()["name"] == "kb-sglang"
    assert Backend.objects.filter(name="kb-sglang").exists()
    assert Event.objects.filter(action="replay.backend_created", actor=owner).exists()


def test_a_key_where_the_variable_name_goes_is_refused_by_field(api, owner, backend):
    api.force_authenticate(owner)

    response = api.post(
        "/api/replay/backends/",
        backend_payload(backend.revision, credential_env=SECRET),
        format="json",
    )

    assert response.status_code == 400
    assert "never the key itself" in response.json()["credential_env"][0]
    assert SECRET not in response.content.decode()
    assert not Backend.objects.filter(name="kb-sglang").exists()


def test_sre_changes_a_backend_and_its_name_stays(api, sre, backend):
    api.force_authenticate(sre)

    response = api.patch(
        f"/api/replay/backends/{backend.name}/",
        {"concurrency_limit": 2, "name": "renamed"},
        format="json",
    )

    backend.refresh_from_db()
    assert response.status_code == 200, response.json()
    assert response.json()["concurrency_limit"] == 2
    assert backend.name == "kb-vllm"
    assert Event.objects.filter(action="replay.backend_updated", actor=sre).exists()


def test_backends_filter_by_service_and_engine(api, auditor, team):
    a = make_backend(team, name="a")
    make_backend(team, name="b", engine=Engine.SGLANG)
    api.force_authenticate(auditor)

    by_service = api.get("/api/replay/backends/", {"service": a.revision.service.slug})
    by_engine = api.get("/api/replay/backends/", {"engine": "sglang"})

    assert [b["name"] for b in by_service.json()["results"]] == ["a"]
    assert [b["name"] for b in by_engine.json()["results"]] == ["b"]


def test_backend_list_query_count_is_constant(api, auditor, team, django_assert_num_queries):
    for n in range(4):
        make_backend(team, name=f"b-{n}")
    api.force_authenticate(auditor)

    # count, the page of backends with revision, service and team
    with django_assert_num_queries(2):
        assert api.get("/api/replay/backends/").status_code == 200


def test_probes_of_a_backend_newest_first_and_filtered(api, auditor, backend):
    now = timezone.now()
    for hours, drift in ((2, []), (1, [{"what": "engine", "registered": "vllm", "reported": "x"}])):
        Probe.objects.create(
            backend=backend,
            fingerprint=backend.revision.fingerprint,
            started_at=now - timezone.timedelta(hours=hours),
            reachable=True,
            drift=drift,
        )
    api.force_authenticate(auditor)

    everything = api.get(f"/api/replay/backends/{backend.name}/probes/").json()["results"]
    drifted = api.get(f"/api/replay/backends/{backend.name}/probes/", {"drifted": "true"})

    assert [p["drift"] != [] for p in everything] == [True, False]
    assert len(drifted.json()["results"]) == 1
    assert everything[0]["backend"] == backend.name
    assert api.get("/api/replay/backends/nope/probes/").status_code == 404


# ---------------------------------------------------------------- sample sets


def test_owner_imports_a_set_as_json_and_again_changes_nothing(api, owner):
    api.force_authenticate(owner)
    body = {"name": "kb-smoke", "description": "Smoke", "jsonl": JSONL}

    first = api.post("/api/replay/sample-sets/import/", body, format="json")
    again = api.post("/api/replay/sample-sets/import/", body, format="json")

    assert first.status_code == 201
    assert first.json()["ref"] == "kb-smoke@1"
    assert first.json()["sample_count"] == 3
    assert again.status_code == 200
    assert again.json()["ref"] == "kb-smoke@1"


def test_import_accepts_a_jsonl_body(api, sre):
    api.force_authenticate(sre)

    response = api.generic(
        "POST",
        "/api/replay/sample-sets/import/?name=kb-smoke&description=From+CI",
        JSONL.encode(),
        content_type="application/x-ndjson",
    )

    assert response.status_code == 201, response.content
    assert SampleSet.objects.get(name="kb-smoke").description == "From CI"


def test_import_errors_name_each_line(api, owner):
    api.force_authenticate(owner)
    bad = JSONL + "{oops\n" + json.dumps({"key": "x", "category": "poetry", "messages": []})

    response = api.post(
        "/api/replay/sample-sets/import/", {"name": "kb-smoke", "jsonl": bad}, format="json"
    )

    errors = response.json()["jsonl"]
    assert response.status_code == 400
    assert errors[0].startswith("line 4: not JSON")
    assert errors[1].startswith("line 5: category")
    assert not SampleSet.objects.exists()


def test_sample_set_detail_by_name_or_version_with_samples(api, auditor):
    SampleFactory.create_batch(2, sample_set=SampleSetFactory(name="kb-smoke", version=1))
    SampleFactory(sample_set=SampleSetFactory(name="kb-smoke", version=2), key="only")
    api.force_authenticate(auditor)

    latest = api.get("/api/replay/sample-sets/kb-smoke/").json()
    first = api.get("/api/replay/sample-sets/kb-smoke@1/").json()

    assert latest["ref"] == "kb-smoke@2"
    assert [s["key"] for s in latest["samples"]] == ["only"]
    assert first["sample_count"] == 2
    assert api.get("/api/replay/sample-sets/kb-smoke@9/").status_code == 404


def test_sample_set_export_is_ndjson(api, auditor):
    api.force_authenticate(auditor)
    from replay import services

    services.import_sample_set(actor=None, name="kb-smoke", jsonl=JSONL)

    response = api.get("/api/replay/sample-sets/kb-smoke@1/export/")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/x-ndjson")
    keys = [json.loads(line)["key"] for line in response.content.decode().splitlines()]
    assert keys == ["capital-fr", "order-json", "refund-ticket"]


def test_sample_set_list_query_count_is_constant(api, auditor, django_assert_num_queries):
    for n in range(4):
        SampleFactory.create_batch(3, sample_set=SampleSetFactory(name=f"set-{n}"))
    api.force_authenticate(auditor)

    # count, the page of versions with their creator and sample count
    with django_assert_num_queries(2):
        response = api.get("/api/replay/sample-sets/", {"latest": "true"})
    assert [s["sample_count"] for s in response.json()["results"]] == [3, 3, 3, 3]


# ---------------------------------------------------------------- runs


def test_owner_starts_a_run_by_set_name(api, owner, backend):
    SampleFactory(sample_set=SampleSetFactory(name="kb-smoke", version=1))
    latest = SampleFactory(sample_set=SampleSetFactory(name="kb-smoke", version=2)).sample_set
    api.force_authenticate(owner)

    response = api.post(
        "/api/replay/runs/",
        {"backend": backend.name, "sample_set": "kb-smoke", "concurrency": 2},
        format="json",
    )

    run = Run.objects.get()
    assert response.status_code == 201, response.json()
    assert response.json()["state"] == "queued"
    assert response.json()["sample_set"] == "kb-smoke@2"
    assert (run.sample_set, run.concurrency, run.requested_by) == (latest, 2, owner)


def test_run_start_names_what_is_wrong(api, owner, backend):
    SampleFactory(sample_set=SampleSetFactory(name="kb-smoke"))
    api.force_authenticate(owner)

    unknown_set = api.post(
        "/api/replay/runs/", {"backend": backend.name, "sample_set": "nope@3"}, format="json"
    )
    too_many = api.post(
        "/api/replay/runs/",
        {"backend": backend.name, "sample_set": "kb-smoke", "concurrency": 99},
        format="json",
    )
    unknown_backend = api.post(
        "/api/replay/runs/", {"backend": "nope", "sample_set": "kb-smoke"}, format="json"
    )

    assert unknown_set.json() == {"sample_set": ["No sample set nope@3."]}
    assert "concurrency limit of kb-vllm" in too_many.json()["concurrency"][0]
    assert "backend" in unknown_backend.json()
    assert not Run.objects.exists()


def test_runs_filter_by_backend_set_revision_state_and_verdict(api, auditor, team):
    a, b = make_backend(team, name="a"), make_backend(team, name="b")
    finish(run_with_results(a, sample_set=SampleSetFactory(name="kb-smoke")))
    passed = finish(run_with_results(b, failing=0, sample_set=SampleSetFactory(name="sql")))
    api.force_authenticate(auditor)

    def ids(**params):
        return [r["id"] for r in api.get("/api/replay/runs/", params).json()["results"]]

    assert ids(backend="b") == [passed.pk]
    assert ids(sample_set="sql") == [passed.pk]
    assert ids(revision=b.revision_id) == [passed.pk]
    assert ids(verdict="passed") == [passed.pk]
    assert len(ids(state="finished")) == 2
    assert ids(state="queued") == []


def test_run_detail_carries_results_with_their_failed_checks(api, auditor, backend):
    run = finish(run_with_results(backend))
    api.force_authenticate(auditor)

    data = api.get(f"/api/replay/runs/{run.pk}/").json()

    failed = [r for r in data["results"] if r["outcome"] == "failed"]
    assert data["verdict"] == "failed"
    assert data["summary"]["pass_rate"] == 0.75
    assert failed[0]["sample"] == "json-0"
    assert failed[0]["failed_checks"][0]["got"].startswith("$.answer:")


def test_run_list_and_detail_query_counts_are_constant(
    api, auditor, backend, django_assert_num_queries
):
    runs = [finish(run_with_results(backend, failing=n, passing=5)) for n in range(3)]
    api.force_authenticate(auditor)

    # count, the page of runs with set, backend, revision, service and requester
    with django_assert_num_queries(2):
        api.get("/api/replay/runs/")
    # the run, its results with their samples
    with django_assert_num_queries(2):
        api.get(f"/api/replay/runs/{runs[-1].pk}/")


def test_schema_documents_the_replay_endpoints(api, auditor):
    api.force_authenticate(auditor)

    schema = api.get("/api/schema/", {"format": "json"}).json()

    for path in [
        "/api/replay/backends/",
        "/api/replay/backends/{name}/probes/",
        "/api/replay/sample-sets/import/",
        "/api/replay/sample-sets/{ref}/export/",
        "/api/replay/runs/",
        "/api/replay/runs/{id}/",
    ]:
        assert path in schema["paths"], path
    export = schema["paths"]["/api/replay/sample-sets/{ref}/export/"]["get"]
    assert "application/x-ndjson" in export["responses"]["200"]["content"]
    assert "post" in schema["paths"]["/api/replay/runs/"]


def test_a_prometheus_matcher_is_checked_and_kept(api, owner, backend):
    api.force_authenticate(owner)

    refused = api.post(
        "/api/replay/backends/",
        backend_payload(backend.revision, metrics_matcher="model_name=kb"),
        format="json",
    )
    kept = api.post(
        "/api/replay/backends/",
        backend_payload(backend.revision, metrics_matcher='{job="vllm", instance="10.0.0.5:8000"}'),
        format="json",
    )

    assert refused.status_code == 400
    assert refused.json()["metrics_matcher"] == [
        'character 12: expected a value in double quotes, e.g. "kb-live" (a PromQL matcher '
        'list, e.g. {model_name="kb-live"}).'
    ]
    assert kept.status_code == 201, kept.json()
    created = Backend.objects.get(name="kb-sglang")
    assert [str(m) for m in created.matchers] == ['job="vllm"', 'instance="10.0.0.5:8000"']
    assert [str(m) for m in backend.matchers] == [f'model_name="{backend.model_name}"']
