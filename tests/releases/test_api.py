"""The releases API as CI and signers use it, each with their own token."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from ledger.models import Event
from releases.governance.snapshot import FORM_FIELDS
from releases.models import Release

pytestmark = pytest.mark.django_db


def client_for(user) -> APIClient:
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


def _form(world) -> dict:
    from tests.releases.factories import complete_form

    return complete_form(world)


def test_ci_files_a_draft_with_four_fields_then_fills_it_in(world, owner):
    api = client_for(owner)
    response = api.post(
        "/api/releases/",
        {
            "service": "kb-assistant",
            "to_revision": world.candidate.pk,
            "change_kind": "model_upgrade",
            "summary": "Qwen2.5 to the March fine-tune",
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["state"] == "draft"
    assert set(FORM_FIELDS) <= set(body)  # the whole form, as a signer's snapshot has it
    assert body["from_revision"] == world.live.pk
    assert len(body["snapshot_hash"]) == 64
    gates = {g["key"]: g for g in body["gates"]}
    assert gates["gray_plan"] == {
        "key": "gray_plan",
        "title": "Gray plan valid",
        "status": "fail",
        "reason": "the gray plan has no stages.",
        "evidence": [],
        "waiver": None,
        "waivable_by": "platform",
    }
    release_id = body["id"]
    response = api.patch(f"/api/releases/{release_id}/", _form(world), format="json")
    assert response.status_code == 200, response.json()
    statuses = {g["key"]: g["status"] for g in response.json()["gates"]}
    assert statuses["gray_plan"] == "pass"
    assert statuses["signoffs"] == "pending"
    load = next(g for g in response.json()["gates"] if g["key"] == "load_evidence")
    assert load["evidence"][0]["kind"] == "loadtest_report"
    assert load["evidence"][0]["url"].startswith("/services/kb-assistant/r2/loadtests/")


def test_filing_for_a_service_of_another_team_answers_403_before_the_body_is_checked(world, owner):
    from tests.factories import UserFactory
    from tests.ledger.factories import ServiceFactory, TeamFactory

    other = UserFactory(username="oscar", roles=["model_owner"])
    ServiceFactory(slug="dataagent-sql", team=TeamFactory(slug="data-team", members=[other]))
    api = client_for(other)
    incomplete = {"service": "kb-assistant", "summary": ""}
    complete = {
        "service": "kb-assistant",
        "to_revision": world.candidate.pk,
        "change_kind": "model_upgrade",
        "summary": "not my team's",
    }
    for body in (incomplete, complete):
        response = api.post("/api/releases/", body, format="json")
        assert response.status_code == 403, response.json()
        assert response.json()["detail"] == (
            "Only model owners of team 'kb-team' can file releases of kb-assistant."
        )
    # Their own service, or one that does not exist: what is wrong with the body.
    own = api.post("/api/releases/", {**incomplete, "service": "dataagent-sql"}, format="json")
    assert own.status_code == 400
    assert set(own.json()) == {"to_revision", "change_kind", "summary"}
    unknown = api.post("/api/releases/", {"service": "no-such-service"}, format="json")
    assert unknown.status_code == 400
    assert "service" in unknown.json()
    assert Release.objects.count() == 0


@pytest.mark.parametrize("who", ["sre", "outsider", "owner_without_team"])
def test_who_can_file_for_no_service_gets_403_whatever_the_body(world, who, sre, outsider):
    from tests.factories import UserFactory

    people = {
        "sre": sre,
        "outsider": outsider,
        "owner_without_team": UserFactory(username="nina", roles=["model_owner"]),
    }
    api = client_for(people[who])
    for body in ({}, {"service": "no-such-service"}, {"service": ["kb-assistant"]}, [1]):
        response = api.post("/api/releases/", body, format="json")
        assert response.status_code == 403, (body, response.json())
        assert response.json()["detail"].endswith("you can file for no service.")
    assert Release.objects.count() == 0


def test_bad_json_in_a_patch_names_the_field_and_path(release, owner):
    response = client_for(owner).patch(
        f"/api/releases/{release.pk}/",
        {"gray_stages": [{"traffic_pct": "half", "observation_minutes": 5}]},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["gray_stages"][0].startswith(
        "gray_stages[0].traffic_pct: 'half' is not of type 'number'"
    )


def test_submit_with_failing_gates_answers_422_listing_them(world, release, owner):
    world.reports["short"].delete()
    response = client_for(owner).post(f"/api/releases/{release.pk}/submit/")
    assert response.status_code == 422
    body = response.json()
    assert [g["key"] for g in body["gates"]] == ["load_evidence"]
    assert body["gates"][0]["reason"] == "no current load-test report for short."
    assert "cannot be submitted" in body["detail"]


def test_an_illegal_transition_answers_409_with_the_reason(release, owner, sre):
    api = client_for(owner)
    assert api.post(f"/api/releases/{release.pk}/submit/").status_code == 200
    before = Event.objects.count()
    response = api.post(f"/api/releases/{release.pk}/submit/")
    assert response.status_code == 409
    assert response.json() == {
        "detail": f"Release #{release.pk} is submitted; only a draft release can be submitted.",
        "state": "submitted",
    }
    assert Event.objects.count() == before


def test_signers_sign_with_their_own_tokens_until_approved(release, owner, signers):
    assert client_for(owner).post(f"/api/releases/{release.pk}/submit/").status_code == 200
    for role, user in signers.items():
        response = client_for(user).post(
            f"/api/releases/{release.pk}/signoffs/",
            {"role": role, "decision": "approve", "comment": "looks right"},
            format="json",
        )
        assert response.status_code == 201, response.json()
        assert response.json()["standing"] is True
    body = client_for(owner).get(f"/api/releases/{release.pk}/").json()
    assert body["state"] == "approved"
    assert {s["role"] for s in body["signoffs"]} == set(signers)
    assert all(s["snapshot_hash"] == body["snapshot_hash"] for s in body["signoffs"])


def test_the_filer_signing_is_refused_with_403(release, owner):
    client_for(owner).post(f"/api/releases/{release.pk}/submit/")
    response = client_for(owner).post(
        f"/api/releases/{release.pk}/signoffs/",
        {"role": "model_team", "decision": "approve"},
        format="json",
    )
    assert response.status_code == 403
    assert "the filer cannot sign" in response.json()["detail"]


def test_a_superuser_outside_the_team_signing_for_it_is_refused_with_403(release, owner):
    from tests.factories import UserFactory

    root = UserFactory(username="root-user", is_superuser=True, is_staff=True)
    client_for(owner).post(f"/api/releases/{release.pk}/submit/")
    response = client_for(root).post(
        f"/api/releases/{release.pk}/signoffs/",
        {"role": "model_team", "decision": "approve"},
        format="json",
    )
    assert response.status_code == 403
    assert "administrators included" in response.json()["detail"]
    assert client_for(owner).get(f"/api/releases/{release.pk}/").json()["signoffs"] == []


def test_a_voided_signoff_shows_why_in_the_api(world, release, owner, sre):
    from tests.releases.factories import report

    client_for(owner).post(f"/api/releases/{release.pk}/submit/")
    client_for(sre).post(
        f"/api/releases/{release.pk}/signoffs/",
        {"role": "platform", "decision": "approve"},
        format="json",
    )
    old = world.reports["short"]
    new = report(world.candidate, "short")
    signoff = client_for(sre).get(f"/api/releases/{release.pk}/").json()["signoffs"][0]
    assert signoff["standing"] is False
    assert signoff["void_reason"] == (
        f"voided: load-test report #{old.pk} (short) replaced by #{new.pk} after you approved"
    )


def test_a_waiver_shows_in_the_api_answer(world, release, owner, sre, business):
    world.reports["short"].delete()
    expires = (timezone.now() + dt.timedelta(days=2)).isoformat()
    refused = client_for(business).post(
        f"/api/releases/{release.pk}/waivers/",
        {"gate": "load_evidence", "reason": "x", "expires_at": expires},
        format="json",
    )
    assert refused.status_code == 403
    missing = client_for(sre).post(
        f"/api/releases/{release.pk}/waivers/", {"gate": "load_evidence"}, format="json"
    )
    assert missing.status_code == 400
    assert set(missing.json()) == {"reason", "expires_at"}
    granted = client_for(sre).post(
        f"/api/releases/{release.pk}/waivers/",
        {"gate": "load_evidence", "reason": "re-measured Monday", "expires_at": expires},
        format="json",
    )
    assert granted.status_code == 201, granted.json()
    body = client_for(owner).get(f"/api/releases/{release.pk}/").json()
    assert body["waivers"][0]["reason"] == "re-measured Monday"
    assert body["waivers"][0]["granted_by"] == "sam"
    gate = next(g for g in body["gates"] if g["key"] == "load_evidence")
    assert gate["status"] == "waived"
    assert gate["waiver"]["granted_by"] == "sam"
    listed = client_for(owner).get("/api/releases/", {"service": "kb-assistant"}).json()
    assert listed["results"][0]["id"] == release.pk


def test_withdraw_and_reopen(release, owner):
    api = client_for(owner)
    response = api.post(
        f"/api/releases/{release.pk}/withdraw/", {"reason": "wrong candidate"}, format="json"
    )
    assert response.status_code == 200
    assert response.json()["state"] == "withdrawn"
    copy = api.post(f"/api/releases/{release.pk}/reopen/")
    assert copy.status_code == 201
    assert copy.json()["state"] == "draft"
    assert copy.json()["reopened_from"] == release.pk


def test_the_release_list_filters_and_counts_its_queries(world, owner, django_assert_num_queries):
    from tests.releases.factories import file_release

    for _ in range(3):
        file_release(world, owner)
    api = client_for(owner)
    # token + user, the count, the page with services and filers
    with django_assert_num_queries(3):
        response = api.get("/api/releases/", {"state": "draft", "tier": "production"})
    assert response.json()["count"] == 3
    refused = api.get("/api/releases/", {"state": "nope"})
    assert refused.status_code == 400
    assert "nope is not one of the allowed values" in refused.json()["state"][0]


def test_release_detail_answers_in_a_constant_number_of_queries(
    world, release, owner, signers, django_assert_num_queries
):
    api = client_for(owner)
    api.post(f"/api/releases/{release.pk}/submit/")
    # token and user, the release, then the gates' twelve (see
    # releases/governance/gates/__init__.py; the eleventh, the price sheet of the
    # candidate's GPU model, came with the cost_record gate, the twelfth, the revisions'
    # capabilities, with impact_assessed)
    with django_assert_num_queries(14):
        api.get(f"/api/releases/{release.pk}/")
    for role in ("platform", "security_compliance"):
        client_for(signers[role]).post(
            f"/api/releases/{release.pk}/signoffs/",
            {"role": role, "decision": "approve"},
            format="json",
        )
    with django_assert_num_queries(14):
        api.get(f"/api/releases/{release.pk}/")
    assert Release.objects.get(pk=release.pk).state == "submitted"
