"""License review and gated-terms acceptance on the pages, and the warnings of the
revision and service pages that use an asset whose license is not cleared."""

from __future__ import annotations

import pytest
from django.test import Client

from ledger import services
from ledger.models import Event, LicenseAcceptance, ModelAsset
from tests.ledger.factories import LicenseFactory, ModelAssetFactory, RevisionFactory


@pytest.fixture
def gated(db):
    return LicenseFactory(
        spdx_id="LicenseRef-Llama-3.1-Community",
        name="Llama 3.1 Community License",
        kind="acceptable_use",
        gated=True,
        terms_url="https://example.com/llama-3.1-license",
    )


@pytest.fixture
def live(team):
    """kb-assistant serving r1, whose asset's license nobody has reviewed."""
    revision = RevisionFactory(service__team=team, service__slug="kb-assistant")
    services.set_live_revision(revision.service, revision, actor=None)
    return revision


def _review_url(asset: ModelAsset) -> str:
    return f"/assets/{asset.pk}/license-review"


def _accept_url(asset: ModelAsset) -> str:
    return f"/assets/{asset.pk}/license-acceptance"


# ---------------------------------------------------------------- review


def test_security_sees_approve_and_reject_on_the_asset_page_others_do_not(
    client, security, owner, auditor, live
):
    asset = live.model_asset
    client.force_login(security)
    for_security = client.get(f"/assets/{asset.pk}/").content.decode()

    assert f'href="{_review_url(asset)}?decision=approved"' in for_security
    assert f'href="{_review_url(asset)}?decision=rejected"' in for_security
    assert "have not reviewed it yet" in for_security
    for person in (owner, auditor):
        client.force_login(person)
        assert _review_url(asset) not in client.get(f"/assets/{asset.pk}/").content.decode()


def test_review_page_says_what_will_happen_and_where_the_asset_is_live(client, security, live):
    client.force_login(security)

    page = client.get(_review_url(live.model_asset), {"decision": "rejected"}).content.decode()

    assert "What will happen" in page
    assert 'href="/services/kb-assistant/"' in page
    assert 'value="rejected" id="id_license_approval_1" required checked' in page
    assert 'name="csrfmiddlewaretoken"' in page
    assert '<form method="post"' in page


def test_security_rejects_with_a_comment_and_the_asset_page_shows_who_why_and_when(
    client, security, live
):
    asset = live.model_asset
    client.force_login(security)

    response = client.post(
        _review_url(asset),
        {"license_approval": "rejected", "comment": "Weights' license forbids SaaS use."},
        follow=True,
    )

    page = response.content.decode()
    asset.refresh_from_db()
    event = Event.objects.filter(action="model_asset.license_reviewed").get()
    assert response.redirect_chain == [(f"/assets/{asset.pk}/", 302)]
    assert asset.license_approval == "rejected"
    assert f"Rejected the license of {asset}." in page
    assert "<q>Weights&#x27; license forbids SaaS use.</q>" in page
    assert f"by <strong>{security.username}</strong>" in page
    assert event.payload_data["comment"] == "Weights' license forbids SaaS use."
    assert event.actor == security


def test_a_rejection_without_a_comment_is_refused_beside_the_field(client, security, live):
    client.force_login(security)

    response = client.post(_review_url(live.model_asset), {"license_approval": "rejected"})

    page = response.content.decode()
    assert response.status_code == 200
    assert "Nothing was saved" in page
    assert 'id="id_comment_error"' in page
    assert "Say why the license is rejected" in page
    assert not Event.objects.filter(action="model_asset.license_reviewed").exists()


def test_a_tampered_decision_names_the_value_and_the_allowed_ones(client, security, live):
    client.force_login(security)

    page = client.post(_review_url(live.model_asset), {"license_approval": "pending"})

    assert "pending is not a decision: choose approve or reject." in page.content.decode()
    live.model_asset.refresh_from_db()
    assert live.model_asset.license_approval == "pending"


@pytest.mark.parametrize("method", ["get", "post"])
def test_owner_cannot_open_or_post_the_review(client, owner, live, method):
    client.force_login(owner)

    response = getattr(client, method)(
        _review_url(live.model_asset), {"license_approval": "approved"}
    )

    assert response.status_code == 403
    assert not Event.objects.filter(action="model_asset.license_reviewed").exists()


def test_the_review_form_needs_its_csrf_token(security, live):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(security)

    response = strict.post(_review_url(live.model_asset), {"license_approval": "approved"})

    assert response.status_code == 403
    live.model_asset.refresh_from_db()
    assert live.model_asset.license_approval == "pending"


def test_the_review_takes_only_get_and_post(client, security, live):
    client.force_login(security)

    assert client.put(_review_url(live.model_asset)).status_code == 405


# ---------------------------------------------------------------- acceptance


def test_owner_records_accepting_gated_terms_and_the_asset_page_lists_it(
    client, owner, team, gated
):
    asset = ModelAssetFactory(team=team, license=gated)
    client.force_login(owner)
    before = client.get(f"/assets/{asset.pk}/").content.decode()

    response = client.post(
        _accept_url(asset),
        {
            "terms_version": "3.1",
            "accepted_by": "Olivia Owner",
            "accepted_at": "2026-11-30T09:15",
            "note": "Accepted on the hub's gate.",
        },
        follow=True,
    )

    page = response.content.decode()
    acceptance = LicenseAcceptance.objects.get()
    assert f'href="{_accept_url(asset)}"' in before
    assert "not accepted" in before
    assert response.redirect_chain == [(f"/assets/{asset.pk}/", 302)]
    assert acceptance.terms_version == "3.1"
    assert acceptance.recorded_by == owner
    assert acceptance.accepted_at.isoformat() == "2026-11-30T09:15:00+00:00"
    assert "Recorded: Olivia Owner accepted LicenseRef-Llama-3.1-Community terms 3.1" in page
    assert "2026-11-30 09:15 UTC" in page
    assert Event.objects.filter(action="license.accepted").count() == 1


def test_acceptance_form_suggests_the_person_recording_it(client, owner, team, gated):
    asset = ModelAssetFactory(team=team, license=gated)
    client.force_login(owner)

    page = client.get(_accept_url(asset)).content.decode()

    assert f'value="{owner.get_full_name() or owner.username}"' in page


def test_an_acceptance_in_the_future_is_refused_beside_its_field(client, owner, team, gated):
    asset = ModelAssetFactory(team=team, license=gated)
    client.force_login(owner)

    page = client.post(
        _accept_url(asset),
        {"terms_version": "3.1", "accepted_by": "Olivia", "accepted_at": "2999-01-01T00:00"},
    ).content.decode()

    assert 'id="id_accepted_at_error"' in page
    assert "is in the future" in page
    assert not LicenseAcceptance.objects.exists()


def test_a_license_that_is_not_gated_has_nothing_to_accept(client, owner, team):
    asset = ModelAssetFactory(team=team, license=LicenseFactory())
    client.force_login(owner)

    page = client.get(_accept_url(asset)).content.decode()
    posted = client.post(_accept_url(asset), {"terms_version": "2.0", "accepted_by": "Olivia"})

    assert "Apache-2.0 is not gated" in page
    assert _accept_url(asset) not in client.get(f"/assets/{asset.pk}/").content.decode()
    assert posted.status_code == 200
    assert not LicenseAcceptance.objects.exists()


def test_auditor_cannot_record_an_acceptance(client, auditor, team, gated):
    asset = ModelAssetFactory(team=team, license=gated)
    client.force_login(auditor)

    response = client.post(_accept_url(asset), {"terms_version": "3.1", "accepted_by": "Ada"})

    assert response.status_code == 403
    assert not LicenseAcceptance.objects.exists()


# ---------------------------------------------------------------- warnings


def test_revision_page_warns_while_the_license_is_pending_and_not_once_approved(
    client, auditor, security, live
):
    client.force_login(auditor)
    url = f"/services/kb-assistant/r{live.number}/"

    pending = client.get(url).content.decode()
    services.set_license_approval(live.model_asset, actor=security, approval="approved")
    approved = client.get(url).content.decode()

    assert 'id="license-warning"' in pending
    assert "awaits approval by security &amp; compliance" in pending
    assert 'id="license-warning"' not in approved
    assert "license approved" in approved


def test_revision_page_warns_about_a_rejected_license(client, auditor, security, live):
    services.set_license_approval(
        live.model_asset, actor=security, approval="rejected", comment="No."
    )
    client.force_login(auditor)

    page = client.get(f"/services/kb-assistant/r{live.number}/").content.decode()

    assert 'id="license-warning"' in page
    assert "Security &amp; compliance rejected the license" in page


def test_revision_page_warns_about_gated_terms_until_someone_accepts_them(
    client, auditor, owner, security, team, gated
):
    revision = RevisionFactory(
        service__team=team, service__slug="kb-assistant", model_asset__license=gated
    )
    services.set_license_approval(revision.model_asset, actor=security, approval="approved")
    client.force_login(auditor)
    url = f"/services/kb-assistant/r{revision.number}/"

    unaccepted = client.get(url).content.decode()
    services.record_license_acceptance(
        revision.model_asset, actor=owner, terms_version="3.1", accepted_by="Olivia"
    )
    accepted = client.get(url).content.decode()

    assert "is gated and nobody has recorded accepting its terms" in unaccepted
    assert 'id="license-warning"' not in accepted


def test_service_page_warns_at_the_top_and_marks_each_revision(client, auditor, security, live):
    candidate = RevisionFactory(
        service=live.service, model_asset__team=live.service.team, model_asset__name="Candidate"
    )
    services.set_license_approval(live.model_asset, actor=security, approval="approved")
    services.set_license_approval(
        candidate.model_asset, actor=security, approval="rejected", comment="NC weights"
    )
    client.force_login(auditor)

    page = client.get("/services/kb-assistant/").content.decode()

    # The live revision is cleared: no warning at the top, but the candidate is marked.
    assert 'id="license-warning"' not in page
    assert ">license rejected</span>" in page
    services.set_license_approval(
        live.model_asset, actor=security, approval="rejected", comment="Terms changed"
    )
    page = client.get("/services/kb-assistant/").content.decode()
    assert page.index('id="license-warning"') < page.index('id="live-heading"')
    assert "The live revision r1 uses" in page


def test_service_timeline_shows_the_review_of_its_asset_with_its_comment(
    client, auditor, security, live
):
    services.set_license_approval(
        live.model_asset, actor=security, approval="rejected", comment="Terms changed"
    )
    client.force_login(auditor)

    page = client.get("/services/kb-assistant/").content.decode()

    timeline = page[page.index('id="events-heading"') :]
    assert "model_asset.license_reviewed" in timeline
    assert '<span class="badge bad">rejected</span> <q>Terms changed</q>' in timeline
