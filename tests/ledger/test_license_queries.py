"""The license judgements (ledger.queries.compliance), the review and acceptance verbs,
and the event reads the Events page uses (ledger.queries.events)."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from ledger import queries, services
from ledger.models import Event, ModelAsset
from tests.ledger.factories import LicenseFactory, ModelAssetFactory, RevisionFactory


@pytest.fixture
def gated(db):
    return LicenseFactory(
        spdx_id="LicenseRef-Llama-3.1-Community",
        name="Llama 3.1 Community License",
        kind="acceptable_use",
        gated=True,
    )


def _codes(findings) -> list[str]:
    return [finding.code for finding in findings]


# ---------------------------------------------------------------- license_problems


def test_an_unreviewed_license_is_a_warning_and_a_rejected_one_a_breach(team, security):
    asset = ModelAssetFactory(team=team)

    pending = queries.license_problems(asset, accepted=False)
    services.set_license_approval(asset, actor=security, approval="rejected", comment="No")
    rejected = queries.license_problems(asset, accepted=False)
    services.set_license_approval(asset, actor=security, approval="approved")
    approved = queries.license_problems(asset, accepted=False)

    assert [(f.code, f.severity) for f in pending] == [("license_pending", "warning")]
    assert [(f.code, f.severity) for f in rejected] == [("license_rejected", "breach")]
    assert approved == []


def test_a_gated_license_needs_an_acceptance_of_its_terms(team, owner, security, gated):
    asset = ModelAssetFactory(team=team, license=gated)
    services.set_license_approval(asset, actor=security, approval="approved")

    before = queries.license_problems_by_asset([asset])[asset.pk]
    services.record_license_acceptance(
        asset, actor=owner, terms_version="3.1", accepted_by="Olivia"
    )
    after = queries.license_problems_by_asset([asset])[asset.pk]

    assert _codes(before) == ["license_unaccepted"]
    assert after == []


def test_an_acceptance_of_the_previous_license_does_not_cover_a_new_one(
    team, owner, security, gated
):
    other = LicenseFactory(
        spdx_id="LicenseRef-Gemma", name="Gemma Terms", kind="acceptable_use", gated=True
    )
    asset = ModelAssetFactory(team=team, license=gated)
    services.record_license_acceptance(
        asset, actor=owner, terms_version="3.1", accepted_by="Olivia"
    )

    services.update_asset(asset, actor=owner, license=other)

    assert queries.accepted_asset_ids([asset]) == set()


def test_changing_the_license_of_an_asset_puts_its_approval_back_to_pending(team, owner, security):
    asset = ModelAssetFactory(team=team)
    services.set_license_approval(asset, actor=security, approval="approved")
    mit = LicenseFactory(spdx_id="MIT", name="MIT License")

    services.update_asset(asset, actor=owner, license=mit)

    asset.refresh_from_db()
    assert asset.license_approval == "pending"
    event = Event.objects.filter(action="model_asset.updated").order_by("-sequence").first()
    assert event.payload_data["after"]["license_approval"] == "pending"


def test_problems_of_many_assets_take_one_query(team, gated, django_assert_num_queries):
    assets = [
        ModelAssetFactory(team=team, license=gated),
        ModelAssetFactory(team=team, license=gated),
        ModelAssetFactory(team=team),
    ]
    loaded = list(
        ModelAsset.objects.select_related("license").filter(pk__in=[a.pk for a in assets])
    )

    with django_assert_num_queries(1):  # the acceptances of the gated ones
        problems = queries.license_problems_by_asset(loaded)

    assert _codes(problems[assets[0].pk]) == ["license_unaccepted", "license_pending"]
    assert _codes(problems[assets[2].pk]) == ["license_pending"]


def test_pending_is_a_breach_on_production_and_a_warning_elsewhere(team):
    production = RevisionFactory(service__team=team, service__tier="production")
    internal = RevisionFactory(service__team=team, service__tier="internal")

    on_production = queries.license_findings(production.service, production)
    on_internal = queries.license_findings(internal.service, internal)

    assert [(f.code, f.severity) for f in queries.license_warnings(on_production)] == [
        ("license_pending", "breach")
    ]
    assert [(f.code, f.severity) for f in queries.license_warnings(on_internal)] == [
        ("license_pending", "warning")
    ]


def test_license_warnings_leave_out_exposure_and_lifecycle_findings(team, security):
    nc = LicenseFactory(spdx_id="CC-BY-NC-4.0", name="CC BY-NC 4.0", kind="non_commercial")
    revision = RevisionFactory(
        service__team=team, service__exposure="external", model_asset__license=nc
    )
    services.set_license_approval(revision.model_asset, actor=security, approval="approved")
    services.deprecate_asset(revision.model_asset, actor=None)
    revision.model_asset.refresh_from_db()

    findings = queries.license_findings(revision.service, revision)

    assert set(_codes(findings)) == {"license_exposure", "asset_deprecated"}
    assert queries.license_warnings(findings) == []


# ---------------------------------------------------------------- the review verb


def test_latest_review_is_read_from_the_ledger(team, security):
    asset = ModelAssetFactory(team=team)
    assert queries.latest_license_review(asset) is None

    services.set_license_approval(asset, actor=security, approval="rejected", comment="NC")
    services.set_license_approval(asset, actor=security, approval="approved", comment="Fixed")

    review = queries.latest_license_review(asset)
    assert review is not None
    assert (review.decision, review.comment, review.actor_label) == (
        "approved",
        "Fixed",
        security.username,
    )


def test_a_review_with_the_same_decision_and_a_new_comment_is_recorded(team, security):
    asset = ModelAssetFactory(team=team)
    services.set_license_approval(asset, actor=security, approval="approved", comment="ok")

    again = services.set_license_approval(asset, actor=security, approval="approved", comment="ok")
    new_comment = services.set_license_approval(
        asset, actor=security, approval="approved", comment="Re-read the terms: still ok"
    )

    assert again is False
    assert new_comment is True
    assert Event.objects.filter(action="model_asset.license_reviewed").count() == 2


def test_a_review_comment_is_limited_and_pending_is_not_a_decision(team, security):
    asset = ModelAssetFactory(team=team)

    with pytest.raises(ValidationError) as too_long:
        services.set_license_approval(
            asset, actor=security, approval="approved", comment="x" * 2001
        )
    with pytest.raises(ValidationError) as pending:
        services.set_license_approval(asset, actor=security, approval="pending")

    assert "2001 characters" in too_long.value.message_dict["comment"][0]
    assert "approved or rejected" in pending.value.message_dict["license_approval"][0]
    assert not Event.objects.filter(action="model_asset.license_reviewed").exists()


def test_who_may_record_an_acceptance(team, owner, security, sre, gated):
    asset = ModelAssetFactory(team=team, license=gated)

    services.record_license_acceptance(
        asset, actor=security, terms_version="3.1", accepted_by="Legal"
    )
    with pytest.raises(PermissionDenied, match="security & compliance or model owners"):
        services.record_license_acceptance(asset, actor=sre, terms_version="3.2", accepted_by="Sam")

    assert asset.license_acceptances.count() == 1


# ---------------------------------------------------------------- events


def test_event_notes_carry_a_review_an_acceptance_and_a_reason(team, owner, security, gated):
    asset = ModelAssetFactory(team=team, license=gated)
    services.set_license_approval(asset, actor=security, approval="rejected", comment="NC")
    services.record_license_acceptance(
        asset, actor=owner, terms_version="3.1", accepted_by="Olivia"
    )
    review, acceptance = (
        Event.objects.get(action="model_asset.license_reviewed"),
        Event.objects.get(action="license.accepted"),
    )
    registered = Event.objects.get(action="model_asset.registered")

    assert queries.event_notes(review) == {"decision": "rejected", "text": "NC"}
    assert queries.event_notes(acceptance) == {
        "decision": "accepted",
        "text": "LicenseRef-Llama-3.1-Community terms 3.1, by Olivia",
    }
    assert queries.event_notes(registered) is None


def test_subject_types_are_named_by_their_models(db):
    names = queries.subject_type_names()

    assert names["ledger.modelasset"] == "Model asset"
    assert names["ledger.licenseacceptance"] == "License acceptance"
    assert "ledger.event" not in names
    labels = [label for _value, label in queries.subject_type_choices()]
    assert labels == sorted(labels)


def test_events_of_a_service_are_one_query(team, django_assert_num_queries):
    revision = RevisionFactory(service__team=team, service__slug="kb-assistant")

    with django_assert_num_queries(1):
        found = list(queries.events_of_service(Event.objects.all(), "kb-assistant"))

    assert {e.subject_type for e in found} == {
        "ledger.service",
        "ledger.modelasset",
        "ledger.runtime",
        "ledger.revision",
        "ledger.gatewaypolicy",  # the version the revision named, recorded with the service
    }
    assert revision.pk
