"""Reading the registry and the event ledger over the REST API."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.core.management import call_command
from django.db import connection, transaction
from rest_framework.authtoken.models import Token

from ledger import services
from ledger.models import Event, License, ModelAsset, Service
from tests.ledger.factories import (
    LicenseFactory,
    ModelAssetFactory,
    RevisionFactory,
    RuntimeFactory,
    ServiceFactory,
    TeamFactory,
)


def _live(revision):
    services.set_live_revision(revision.service, revision, actor=None)
    revision.refresh_from_db()
    return revision


@pytest.fixture
def kb(team):
    """kb-assistant, production, serving r1 on vLLM; r2 is a candidate."""
    service = ServiceFactory(
        slug="kb-assistant",
        name="Knowledge base assistant",
        team=team,
        tier=Service.Tier.PRODUCTION,
        task_types=["chat", "rag"],
    )
    r1 = _live(RevisionFactory(service=service))
    r2 = RevisionFactory(service=service, gateway_policy_version="gw-2")
    return service, r1, r2


# ---------------------------------------------------------------- access


def test_anonymous_callers_get_401_on_every_list(client, db):
    for url in [
        "/api/teams/",
        "/api/licenses/",
        "/api/services/",
        "/api/assets/",
        "/api/runtimes/",
        "/api/revisions/",
        "/api/capabilities/",
        "/api/events/",
        "/api/events/verify/",
    ]:
        assert client.get(url).status_code == 401, url


def test_auditor_reads_every_list_and_detail(client, auditor, kb):
    _, r1, _ = kb
    client.force_login(auditor)

    for url in [
        "/api/teams/",
        "/api/teams/kb-team/",
        "/api/licenses/",
        "/api/licenses/Apache-2.0/",
        "/api/services/",
        "/api/services/kb-assistant/",
        "/api/assets/",
        f"/api/assets/{r1.model_asset_id}/",
        "/api/runtimes/",
        f"/api/runtimes/{r1.runtime.name}/",
        "/api/revisions/",
        f"/api/revisions/{r1.pk}/",
        "/api/capabilities/",
        "/api/events/",
        "/api/events/1/",
        "/api/events/verify/",
    ]:
        assert client.get(url).status_code == 200, url


def test_token_authentication_reads_the_catalog(client, sre, kb):
    token = Token.objects.create(user=sre)

    response = client.get("/api/services/", HTTP_AUTHORIZATION=f"Token {token.key}")

    assert response.status_code == 200
    assert [s["slug"] for s in response.json()["results"]] == ["kb-assistant"]


def test_teams_show_member_usernames_and_no_credentials(client, auditor, owner, team):
    client.force_login(auditor)

    response = client.get("/api/teams/kb-team/")

    assert response.json() == {
        "slug": "kb-team",
        "name": "Knowledge base team",
        "members": ["olivia"],
    }
    assert "password" not in client.get("/api/revisions/").content.decode()


def test_team_and_license_lists_run_a_constant_number_of_queries(
    client, auditor, owner, sre, team, django_assert_num_queries
):
    TeamFactory(slug="data-team", members=[owner, sre])
    LicenseFactory()
    LicenseFactory(spdx_id="MIT", name="MIT License")
    client.force_login(auditor)

    # session, user, COUNT(*), teams, their members prefetched.
    with django_assert_num_queries(5):
        teams = client.get("/api/teams/").json()
    # session, user, COUNT(*), licenses.
    with django_assert_num_queries(4):
        licenses = client.get("/api/licenses/?kind=permissive").json()
    assert [t["members"] for t in teams["results"]] == [["olivia", "sam"], ["olivia"]]
    assert [lic["spdx_id"] for lic in licenses["results"]] == ["Apache-2.0", "MIT"]


# ---------------------------------------------------------------- services


def test_service_detail_by_slug_shows_live_revision_and_license_findings(client, sre, kb):
    _, r1, _ = kb
    client.force_login(sre)

    response = client.get("/api/services/kb-assistant/")

    body = response.json()
    assert response.status_code == 200
    assert body["team"] == "kb-team"
    assert body["task_types"] == ["chat", "rag"]
    assert body["live_revision"]["id"] == r1.pk
    assert body["live_revision"]["label"] == "r1"
    assert body["live_revision"]["fingerprint"] == r1.fingerprint
    assert body["live_revision"]["engine"] == "vllm"
    # A production service whose asset's license is not approved yet: a breach.
    first = body["license_findings"][0]
    assert (first["severity"], first["code"]) == ("breach", "license_pending")


def test_non_commercial_license_on_an_external_service_is_flagged(client, sre, team):
    nc = LicenseFactory(
        spdx_id="CC-BY-NC-4.0", name="CC BY-NC 4.0", kind=License.Kind.NON_COMMERCIAL
    )
    service = ServiceFactory(slug="public-chat", team=team, exposure="external")
    _live(RevisionFactory(service=service, model_asset__license=nc))
    client.force_login(sre)

    findings = client.get("/api/services/public-chat/").json()["license_findings"]

    assert "license_exposure" in [f["code"] for f in findings]


def test_services_filter_by_tier_team_engine_task_type_and_words(client, sre, kb):
    other_team = TeamFactory(slug="data-team")
    sql = ServiceFactory(
        slug="dataagent-sql", name="Data agent SQL", team=other_team, task_types=["sql"]
    )
    _live(RevisionFactory(service=sql, runtime__engine="sglang", runtime__launch_parameters={}))
    ServiceFactory(slug="sandbox", tier=Service.Tier.EXPERIMENTAL)
    client.force_login(sre)

    def slugs(query: str) -> list[str]:
        return [s["slug"] for s in client.get(f"/api/services/?{query}").json()["results"]]

    assert slugs("tier=production") == ["kb-assistant"]
    assert slugs("team=data-team") == ["dataagent-sql"]
    assert slugs("engine=sglang") == ["dataagent-sql"]
    assert slugs("engine=vllm") == ["kb-assistant"]
    assert slugs("task_type=rag") == ["kb-assistant"]
    assert slugs("q=knowledge") == ["kb-assistant"]
    assert slugs("q=sql") == ["dataagent-sql"]
    assert slugs("") == ["dataagent-sql", "kb-assistant", "sandbox"]


def test_service_list_runs_a_constant_number_of_queries(
    client, sre, team, django_assert_num_queries
):
    for _ in range(3):
        service = ServiceFactory(team=team, task_types=["chat"])
        _live(RevisionFactory(service=service))
    client.force_login(sre)

    # session, user, COUNT(*) for the page, services joined with team and the
    # live revision's asset and runtime, task types prefetched for the page.
    with django_assert_num_queries(5):
        response = client.get("/api/services/")
    assert response.json()["count"] == 3

    for _ in range(3):
        _live(RevisionFactory(service=ServiceFactory(team=team, task_types=["rag"])))
    with django_assert_num_queries(5):
        assert client.get("/api/services/").json()["count"] == 6


# ---------------------------------------------------------------- assets and runtimes


def test_assets_filter_by_family_quantization_lifecycle_and_license(client, sre, team):
    base = ModelAssetFactory(name="Qwen2.5-7B-Instruct", team=team)
    awq = ModelAssetFactory(
        name="Qwen2.5-7B-Instruct-AWQ",
        team=team,
        quantization=ModelAsset.Quantization.INT4_AWQ,
        derived_from=base,
        derivation=ModelAsset.Derivation.QUANTIZED,
    )
    llama = ModelAssetFactory(
        name="Llama-3.1-8B-Instruct",
        team=team,
        family="llama-3.1",
        license=LicenseFactory(
            spdx_id="LicenseRef-Llama-3.1-Community",
            name="Llama 3.1 Community License",
            kind=License.Kind.ACCEPTABLE_USE,
        ),
    )
    services.retire_asset(llama, actor=None)
    client.force_login(sre)

    def names(query: str) -> list[str]:
        return [a["name"] for a in client.get(f"/api/assets/?{query}").json()["results"]]

    assert names("family=qwen2.5") == [base.name, awq.name]
    assert names("quantization=int4-awq") == [awq.name]
    assert names("lifecycle=retired") == [llama.name]
    assert names("license=LicenseRef-Llama-3.1-Community") == [llama.name]
    assert names(f"derived_from={base.pk}") == [awq.name]


def test_asset_detail_shows_its_lineage_base_first(client, sre, team):
    base = ModelAssetFactory(name="Qwen2.5-7B-Instruct", team=team)
    awq = ModelAssetFactory(
        name="Qwen2.5-7B-Instruct-AWQ",
        team=team,
        derived_from=base,
        derivation=ModelAsset.Derivation.QUANTIZED,
    )
    client.force_login(sre)

    body = client.get(f"/api/assets/{awq.pk}/").json()

    assert [a["name"] for a in body["lineage"]] == [base.name, awq.name]
    assert body["license"] == "Apache-2.0"
    assert body["locked"] is False


def test_asset_list_runs_a_constant_number_of_queries(client, sre, team, django_assert_num_queries):
    ModelAssetFactory.create_batch(4, team=team)
    client.force_login(sre)

    # session, user, COUNT(*), assets joined with team and license, then the page's lock
    # reasons: one query per rule (has served, referenced by a release past draft).
    with django_assert_num_queries(6):
        assert client.get("/api/assets/").json()["count"] == 4


def test_runtime_detail_by_name_shows_lock_and_warnings(client, sre, kb):
    _, r1, _ = kb
    client.force_login(sre)

    body = client.get(f"/api/runtimes/{r1.runtime.name}/").json()

    assert body["locked"] is True
    assert body["lock_reasons"] == ["kb-assistant r1 has served with it"]
    assert body["image_digest"].startswith("sha256:")
    assert body["warnings"] == []


def test_runtime_list_runs_a_constant_number_of_queries(
    client, sre, team, django_assert_num_queries
):
    RuntimeFactory.create_batch(4, team=team)
    client.force_login(sre)

    # session, user, COUNT(*), runtimes joined with team, then the page's lock reasons:
    # one query per rule (has served, referenced by a release past draft).
    with django_assert_num_queries(6):
        assert client.get("/api/runtimes/?engine=vllm").json()["count"] == 4


# ---------------------------------------------------------------- revisions


def test_revision_detail_shows_fingerprint_lock_and_same_fingerprint(client, sre, kb):
    _, r1, _ = kb
    twin = services.new_revision_from(r1, actor=None, notes="same parts, new notes")
    client.force_login(sre)

    body = client.get(f"/api/revisions/{r1.pk}/").json()

    assert body["fingerprint"] == r1.fingerprint
    assert body["locked"] is True
    assert body["lock_reasons"] == ["r1 has served live traffic"]
    assert body["same_fingerprint"] == [{"id": twin.pk, "service": "kb-assistant", "label": "r3"}]
    assert body["service"] == "kb-assistant"
    assert body["runtime"] == r1.runtime.name


def test_revisions_filter_by_service_and_fingerprint(client, sre, kb):
    _, r1, r2 = kb
    ServiceFactory(slug="other")
    client.force_login(sre)

    def ids(query: str) -> list[int]:
        return [r["id"] for r in client.get(f"/api/revisions/?{query}").json()["results"]]

    assert ids("service=kb-assistant") == [r2.pk, r1.pk]
    assert ids(f"fingerprint={r2.fingerprint}") == [r2.pk]
    assert ids("served=true") == [r1.pk]
    assert ids("service=other") == []


def test_revision_list_runs_a_constant_number_of_queries(
    client, sre, team, django_assert_num_queries
):
    for _ in range(3):
        RevisionFactory(service__team=team)
    client.force_login(sre)

    # session, user, COUNT(*), revisions joined with service, team, asset,
    # runtime and creator, then the page's releases past draft (the lock rule).
    with django_assert_num_queries(5):
        body = client.get("/api/revisions/").json()
    assert body["count"] == 3
    assert {r["locked"] for r in body["results"]} == {False}


def test_capability_list_runs_a_constant_number_of_queries(
    client, sre, kb, django_assert_num_queries
):
    _, r1, r2 = kb
    for revision in (r1, r2):
        services.declare_capability(revision, actor=None, kind="streaming", value="sse")
        services.declare_capability(revision, actor=None, kind="tool_calling", value=True)
    client.force_login(sre)

    # session, user, COUNT(*), capabilities joined with revision and service.
    with django_assert_num_queries(4):
        body = client.get("/api/capabilities/?service=kb-assistant").json()
    assert body["count"] == 4
    assert {c["service"] for c in body["results"]} == {"kb-assistant"}


# ---------------------------------------------------------------- events


def test_events_are_listed_with_parsed_payload_and_hashes(client, auditor, kb):
    service, _, _ = kb
    client.force_login(auditor)

    body = client.get(
        f"/api/events/?subject_type=ledger.service&subject_id={service.pk}&action=service.created"
    ).json()

    (event,) = body["results"]
    assert event["actor"] == "system"
    assert event["payload"]["after"]["slug"] == "kb-assistant"
    assert len(event["prev_hash"]) == len(event["hash"]) == 64
    detail = client.get(f"/api/events/{event['sequence']}/").json()
    assert detail == event


def test_events_filter_by_actor_and_period(client, auditor, owner, team):
    with time_machine.travel(dt.datetime(2025, 3, 1, 12, tzinfo=dt.UTC), tick=False):
        ServiceFactory(slug="march", team=team)
    with time_machine.travel(dt.datetime(2025, 4, 1, 12, tzinfo=dt.UTC), tick=False):
        services.create_service(actor=owner, slug="april", name="April", team=team)
    client.force_login(auditor)

    def labels(query: str) -> list[str]:
        return [e["subject_label"] for e in client.get(f"/api/events/?{query}").json()["results"]]

    assert labels("actor=olivia") == ["april"]
    assert labels("created_before=2025-03-15T00:00:00Z") == ["march"]
    assert labels("created_after=2025-03-15T00:00:00%2B00:00") == ["april"]
    assert client.get("/api/events/?created_after=last-tuesday").status_code == 400


def test_event_list_runs_a_constant_number_of_queries(
    client, auditor, kb, django_assert_num_queries
):
    client.force_login(auditor)
    expected = Event.objects.count()

    # session, user, COUNT(*), one page of events.
    with django_assert_num_queries(4):
        assert client.get("/api/events/").json()["count"] == expected


def test_events_cannot_be_written_over_the_api(client, owner, kb):
    client.force_login(owner)
    before = Event.objects.count()

    assert client.post("/api/events/", {}, content_type="application/json").status_code == 405
    assert (
        client.patch("/api/events/1/", {"action": "x"}, content_type="application/json")
    ).status_code == 405
    assert client.delete("/api/events/1/").status_code == 405
    assert Event.objects.count() == before


def test_verify_reports_an_intact_chain(client, auditor, kb):
    client.force_login(auditor)

    body = client.get("/api/events/verify/").json()

    assert body == {
        "ok": True,
        "count": Event.objects.count(),
        "head_hash": Event.objects.order_by("-sequence").first().hash,
        "first_bad_sequence": None,
        "problem": "",
        "signatures_from": 1,  # every signature checked: no checkpoint vouches for any
        "checkpoint": None,  # none was taken yet
    }


def test_verify_names_the_first_event_changed_behind_the_apps_back(client, auditor, kb):
    target = Event.objects.get(sequence=2)
    with transaction.atomic(), connection.cursor() as cursor:
        # Bypass the append-only trigger, as someone with database access could.
        cursor.execute("SET LOCAL session_replication_role = replica")
        cursor.execute("UPDATE ledger_event SET actor_label = 'mallory' WHERE id = %s", [target.pk])
    client.force_login(auditor)

    body = client.get("/api/events/verify/").json()

    assert body["ok"] is False
    assert body["count"] == 1
    assert body["first_bad_sequence"] == 2
    assert "does not match its hash" in body["problem"]


# ---------------------------------------------------------------- schema


def test_openapi_schema_validates_without_warnings(scratch_dir, db):
    out = scratch_dir / "schema.yaml"

    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))

    text = out.read_text()
    for path in [
        "/api/teams/{slug}/",
        "/api/licenses/{spdx_id}/",
        "/api/services/{slug}/",
        "/api/assets/{id}/license-review/",
        "/api/runtimes/{name}/",
        "/api/revisions/{id}/new-revision/",
        "/api/revisions/{id}/diff/{other_id}/",
        "/api/capabilities/{id}/",
        "/api/events/{sequence}/",
        "/api/events/verify/",
    ]:
        assert f"  {path}:" in text, path


def test_schema_endpoint_lists_the_registry(client, auditor):
    client.force_login(auditor)

    paths = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()["paths"]

    assert {"get", "post"} <= set(paths["/api/services/"])
    assert {"get", "patch"} == set(paths["/api/services/{slug}/"])
    assert set(paths["/api/events/{sequence}/"]) == {"get"}


def test_events_filter_by_service_slug(client, auditor, team):
    from tests.ledger.factories import RevisionFactory

    kept = RevisionFactory(service__team=team, service__slug="kb-assistant")
    RevisionFactory(service__team=team, service__slug="other-service")
    client.force_login(auditor)

    response = client.get("/api/events/", {"service": "kb-assistant"})

    subjects = {(e["subject_type"], e["subject_id"]) for e in response.json()["results"]}
    # The service, its revision and the version of its gateway policy the revision
    # named, and the asset and runtime the revision uses.
    assert subjects == {
        ("ledger.service", str(kept.service_id)),
        ("ledger.revision", str(kept.pk)),
        ("ledger.gatewaypolicy", str(kept.gateway_policy_id)),
        ("ledger.modelasset", str(kept.model_asset_id)),
        ("ledger.runtime", str(kept.runtime_id)),
    }
