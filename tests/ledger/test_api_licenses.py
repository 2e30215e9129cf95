"""The license review and gated-license acceptances over REST."""

from __future__ import annotations

import json

import pytest

from ledger.models import Event, LicenseAcceptance, ModelAsset
from tests.ledger.factories import LicenseFactory, ModelAssetFactory


@pytest.fixture
def asset(team):
    return ModelAssetFactory(team=team, name="Qwen2.5-7B-Instruct", license=LicenseFactory())


@pytest.fixture
def gated_asset(team):
    llama = LicenseFactory(
        spdx_id="LicenseRef-Llama-3.1-Community",
        name="Llama 3.1 Community License",
        kind="acceptable_use",
        gated=True,
    )
    return ModelAssetFactory(team=team, name="Llama-3.1-8B-Instruct", license=llama)


def _review_url(asset: ModelAsset) -> str:
    return f"/api/assets/{asset.pk}/license-review/"


def _acceptance_url(asset: ModelAsset) -> str:
    return f"/api/assets/{asset.pk}/license-acceptances/"


def test_security_rejects_a_license_with_a_comment_and_the_ledger_keeps_both(
    client, security, asset
):
    client.force_login(security)

    response = client.post(
        _review_url(asset),
        {"license_approval": "rejected", "comment": "Terms forbid serving customers."},
        content_type="application/json",
    )

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["license_approval"] == "rejected"
    assert body["license_review"]["decision"] == "rejected"
    assert body["license_review"]["comment"] == "Terms forbid serving customers."
    assert body["license_review"]["reviewer"] == security.username
    event = Event.objects.order_by("-sequence").first()
    assert event.action == "model_asset.license_reviewed"
    assert event.payload_data["decision"] == "rejected"
    assert event.payload_data["comment"] == "Terms forbid serving customers."
    assert event.actor_label == security.username


def test_a_rejection_without_a_comment_is_refused_naming_the_field(client, security, asset):
    client.force_login(security)
    events = Event.objects.count()

    response = client.post(
        _review_url(asset), {"license_approval": "rejected"}, content_type="application/json"
    )

    assert response.status_code == 400
    assert "Say why the license is rejected" in response.json()["comment"][0]
    asset.refresh_from_db()
    assert asset.license_approval == "pending"
    assert Event.objects.count() == events


def test_a_review_decision_is_approved_or_rejected_and_the_error_names_both(
    client, security, asset
):
    client.force_login(security)

    response = client.post(
        _review_url(asset), {"license_approval": "pending"}, content_type="application/json"
    )

    assert response.status_code == 400
    message = response.json()["license_approval"][0]
    assert "pending" in message
    assert "approved" in message and "rejected" in message


def test_the_browsable_api_offers_only_the_review_fields_and_accepts_them(client, security, asset):
    client.force_login(security)

    page = client.get(_review_url(asset), HTTP_ACCEPT="text/html").content.decode()
    raw = page[page.index('<textarea name="_content"') :]
    raw = raw[: raw.index("</textarea>")].replace("&quot;", '"')
    # What the browsable API's form then sends, as JSON (its only parser).
    response = client.post(
        _review_url(asset),
        {"license_approval": "approved", "comment": ""},
        content_type="application/json",
        HTTP_ACCEPT="text/html",
    )

    assert '"license_approval": null' in raw
    assert '"comment": ""' in raw
    # The asset's own fields are not asked for.
    assert "weights_digest" not in raw
    assert "source_repository" not in raw
    assert response.status_code == 200
    asset.refresh_from_db()
    assert asset.license_approval == "approved"


def test_the_schema_documents_only_the_review_and_acceptance_fields(client, auditor):
    client.force_login(auditor)

    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()

    def request_fields(path: str) -> set[str]:
        body = schema["paths"][path]["post"]["requestBody"]["content"]["application/json"]
        ref = body["schema"]["$ref"].rsplit("/", 1)[-1]
        return set(schema["components"]["schemas"][ref]["properties"])

    assert request_fields("/api/assets/{id}/license-review/") == {"license_approval", "comment"}
    assert request_fields("/api/assets/{id}/license-acceptances/") == {
        "terms_version",
        "accepted_by",
        "accepted_at",
        "note",
    }
    assert request_fields("/api/assets/{id}/deprecate/") == {"on"}


def test_the_same_review_sent_twice_is_recorded_once(client, security, asset):
    client.force_login(security)
    payload = {"license_approval": "approved", "comment": "Apache-2.0, fine."}

    first = client.post(_review_url(asset), payload, content_type="application/json")
    second = client.post(_review_url(asset), payload, content_type="application/json")

    assert first.status_code == second.status_code == 200
    assert Event.objects.filter(action="model_asset.license_reviewed").count() == 1


def test_owner_cannot_review_a_license(client, owner, asset):
    client.force_login(owner)

    response = client.post(
        _review_url(asset), {"license_approval": "approved"}, content_type="application/json"
    )

    assert response.status_code == 403
    asset.refresh_from_db()
    assert asset.license_approval == "pending"


def test_owner_records_accepting_gated_terms(client, owner, gated_asset):
    client.force_login(owner)

    response = client.post(
        _acceptance_url(gated_asset),
        {
            "terms_version": "3.1",
            "accepted_by": "Olivia Owner",
            "accepted_at": "2026-11-30T09:15:00+00:00",
            "note": "Accepted on the model hub's gate.",
        },
        content_type="application/json",
    )

    assert response.status_code == 201, response.content
    body = response.json()
    assert body["license"] == "LicenseRef-Llama-3.1-Community"
    assert body["terms_version"] == "3.1"
    assert body["recorded_by"] == owner.username
    acceptance = LicenseAcceptance.objects.get()
    assert acceptance.accepted_by == "Olivia Owner"
    assert acceptance.accepted_at.isoformat() == "2026-11-30T09:15:00+00:00"
    event = Event.objects.order_by("-sequence").first()
    assert event.action == "license.accepted"
    assert event.subject_type == "ledger.licenseacceptance"
    assert json.loads(event.payload)["after"]["terms_version"] == "3.1"
    detail = client.get(f"/api/assets/{gated_asset.pk}/").json()
    assert [a["terms_version"] for a in detail["license_acceptances"]] == ["3.1"]


def test_security_records_an_acceptance_for_any_team(client, security, gated_asset):
    client.force_login(security)

    response = client.post(
        _acceptance_url(gated_asset),
        {"terms_version": "3.1", "accepted_by": "Legal"},
        content_type="application/json",
    )

    assert response.status_code == 201


@pytest.mark.parametrize("who", ["sre", "auditor", "other_team_owner"])
def test_others_cannot_record_an_acceptance(client, gated_asset, sre, auditor, who):
    from tests.factories import UserFactory
    from tests.ledger.factories import TeamFactory

    people = {"sre": sre, "auditor": auditor}
    if who == "other_team_owner":
        people[who] = UserFactory(username="oscar", roles=["model_owner"])
        TeamFactory(slug="data-team", members=[people[who]])
    client.force_login(people[who])

    response = client.post(
        _acceptance_url(gated_asset),
        {"terms_version": "3.1", "accepted_by": "Someone"},
        content_type="application/json",
    )

    assert response.status_code == 403
    assert not LicenseAcceptance.objects.exists()


def test_an_acceptance_of_a_license_that_is_not_gated_is_refused(client, owner, asset):
    client.force_login(owner)

    response = client.post(
        _acceptance_url(asset),
        {"terms_version": "2.0", "accepted_by": "Olivia"},
        content_type="application/json",
    )

    assert response.status_code == 400
    assert "Apache-2.0 is not gated" in response.json()["terms_version"][0]
    assert not LicenseAcceptance.objects.exists()


def test_an_acceptance_in_the_future_or_twice_is_refused_naming_the_field(
    client, owner, gated_asset
):
    client.force_login(owner)
    url = _acceptance_url(gated_asset)
    payload = {"terms_version": "3.1", "accepted_by": "Olivia"}

    future = client.post(
        url, {**payload, "accepted_at": "2999-01-01T00:00:00Z"}, content_type="application/json"
    )
    first = client.post(url, payload, content_type="application/json")
    again = client.post(url, payload, content_type="application/json")
    blank = client.post(
        url, {"terms_version": "  ", "accepted_by": "Olivia"}, content_type="application/json"
    )

    assert future.status_code == 400
    assert "in the future" in future.json()["accepted_at"][0]
    assert first.status_code == 201
    assert again.status_code == 400
    assert "already recorded" in again.json()["terms_version"][0]
    assert blank.status_code == 400
    assert "terms_version" in blank.json()
    assert LicenseAcceptance.objects.count() == 1
