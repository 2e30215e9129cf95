"""The event ledger page and its chain check, through the client."""

from __future__ import annotations

import pytest
import time_machine

from ledger import services
from ledger.models import Event
from tests.ledger.factories import (
    LicenseFactory,
    ModelAssetFactory,
    RevisionFactory,
    RuntimeFactory,
    ServiceFactory,
)
from tests.support import triggers


@pytest.fixture
def history(owner, team):
    """Events in January (system) and in March (the owner)."""
    with time_machine.travel("2026-01-10 12:00Z"):
        service = ServiceFactory(team=team, slug="kb-assistant", name="KB")
        revision = RevisionFactory(service=service)
    with time_machine.travel("2026-03-05 12:00Z"):
        services.update_service(service, actor=owner, name="Knowledge base")
        services.declare_capability(revision, actor=owner, kind="streaming", value="sse")
    return service, revision


def test_event_list_shows_sequence_time_actor_action_subject_and_short_hash(
    client, auditor, history
):
    _service, revision = history
    client.force_login(auditor)

    response = client.get("/events/")

    page = response.content.decode()
    newest = Event.objects.order_by("-sequence").first()
    assert response.status_code == 200
    assert f'<td data-label="#" class="num">{newest.sequence}</td>' in page
    assert "2026-03-05 12:00 UTC" in page
    assert f'<code class="nowrap" title="{newest.hash}">{newest.hash[:12]}</code>' in page
    assert 'href="/services/kb-assistant/"' in page
    assert 'href="/services/kb-assistant/r1/"' in page
    assert f'href="/assets/{revision.model_asset_id}/"' in page
    assert f'href="/runtimes/{revision.runtime.name}/"' in page


def test_event_list_filters_by_subject_actor_action_and_period(client, auditor, owner, history):
    client.force_login(auditor)

    def actions(**params):
        return [e.action for e in client.get("/events/", params).context["page"].object_list]

    assert actions(subject_type="ledger.service") == ["service.updated", "service.created"]
    assert actions(actor=owner.username) == ["capability.declared", "service.updated"]
    assert actions(action="revision.") == ["revision.created"]
    assert actions(date_from="2026-03-01") == ["capability.declared", "service.updated"]
    assert "service.created" in actions(date_to="2026-01-31")
    assert "service.updated" not in actions(date_to="2026-01-31")


def test_event_list_says_when_a_period_ends_before_it_starts(client, auditor, history):
    client.force_login(auditor)

    page = client.get("/events/", {"date_from": "2026-03-01", "date_to": "2026-01-01"})

    assert "The period ends before it starts." in page.content.decode()


def test_event_list_pages_and_keeps_the_filters(client, auditor, owner, team):
    asset = ModelAssetFactory(team=team)
    for n in range(30):
        services.update_asset(asset, actor=owner, family=f"family-{n}")
    client.force_login(auditor)

    response = client.get("/events/", {"action": "model_asset.updated"})

    assert response.context["page"].paginator.count == 30
    assert 'href="?action=model_asset.updated&amp;page=2"' in response.content.decode()


def test_event_list_empty_state(client, auditor):
    client.force_login(auditor)

    assert "The ledger is empty" in client.get("/events/").content.decode()
    filtered = client.get("/events/", {"actor": "nobody"}).content.decode()
    assert "No event matches these filters" in filtered


def test_event_list_does_not_verify_the_chain_on_load(client, auditor, history):
    client.force_login(auditor)

    page = client.get("/events/").content.decode()

    assert 'hx-get="/events/verify"' in page
    assert 'href="/events/verify"' in page
    assert "intact" not in page


def test_verify_chain_with_htmx_returns_the_status_fragment(client, auditor, history):
    client.force_login(auditor)

    response = client.get("/events/verify", HTTP_HX_REQUEST="true")

    body = response.content.decode()
    count = Event.objects.count()
    assert "<html" not in body
    assert body.startswith('<div class="panel chain-status" id="chain-status"')
    assert f"All {count} events match their hashes" in body
    assert Event.objects.order_by("-sequence").first().hash in body


def test_verify_chain_without_javascript_renders_a_page(client, auditor, history):
    client.force_login(auditor)

    response = client.get("/events/verify")

    assert "<html" in response.content.decode()
    assert '<span class="badge ok">intact</span>' in response.content.decode()


def test_verify_chain_names_the_first_altered_event(client, auditor, history):
    victim = Event.objects.order_by("sequence")[1]
    with triggers.ignoring("ledger.Event:ledger_event_append_only"):
        Event.objects.filter(pk=victim.pk).update(actor_label="mallory")
    client.force_login(auditor)

    body = client.get("/events/verify", HTTP_HX_REQUEST="true").content.decode()

    assert '<span class="badge bad">broken</span>' in body
    assert f"Event #{victim.sequence}" in body


def test_verify_chain_takes_only_get(client, auditor):
    client.force_login(auditor)

    assert client.post("/events/verify").status_code == 405


def test_auditor_filters_events_by_service_and_tier(client, auditor, team):
    production = RevisionFactory(
        service__team=team, service__slug="kb-assistant", service__tier="production"
    )
    RevisionFactory(service__team=team, service__slug="doc-translate", service__tier="internal")
    services.declare_capability(production, actor=None, kind="tool_calling", value=True)
    client.force_login(auditor)

    by_service = client.get("/events/", {"service": "kb-assistant"}).context["page"].object_list
    by_tier = client.get("/events/", {"tier": "internal"}).context["page"].object_list

    assert {e.service_id for e in by_service} <= {production.service_id, None}
    # The service, its revision and the capability declared on that revision.
    assert {e.action for e in by_service} >= {
        "service.created",
        "revision.created",
        "capability.declared",
    }
    assert by_tier and all(e.service.slug == "doc-translate" for e in by_tier)


def test_service_filter_takes_in_its_assets_runtimes_capabilities_and_acceptances(
    client, auditor, security, owner, team
):
    gated = LicenseFactory(
        spdx_id="LicenseRef-Gemma", name="Gemma Terms", kind="acceptable_use", gated=True
    )
    kept = RevisionFactory(
        service__team=team, service__slug="kb-assistant", model_asset__license=gated
    )
    other = RevisionFactory(service__team=team, service__slug="doc-translate")
    services.set_license_approval(
        kept.model_asset, actor=security, approval="rejected", comment="Gemma terms unclear"
    )
    services.record_license_acceptance(
        kept.model_asset, actor=owner, terms_version="2024-02-21", accepted_by="Olivia"
    )
    services.update_runtime(kept.runtime, actor=None, engine_version="0.6.4")
    services.update_asset(other.model_asset, actor=None, family="other-family")
    services.update_runtime(other.runtime, actor=None, engine_version="0.7.0")
    client.force_login(auditor)

    found = client.get("/events/", {"service": "kb-assistant"}).context["page"].object_list
    api = client.get("/api/events/", {"service": "kb-assistant"}).json()["results"]

    subjects = {(e.subject_type, e.subject_id) for e in found}
    assert ("ledger.modelasset", str(kept.model_asset_id)) in subjects
    assert ("ledger.runtime", str(kept.runtime_id)) in subjects
    assert any(e.subject_type == "ledger.licenseacceptance" for e in found)
    assert {"model_asset.license_reviewed", "license.accepted", "runtime.updated"} <= {
        e.action for e in found
    }
    assert ("ledger.modelasset", str(other.model_asset_id)) not in subjects
    assert ("ledger.runtime", str(other.runtime_id)) not in subjects
    assert "revision.created" in {e.action for e in found}
    assert {e["sequence"] for e in api} == {e.sequence for e in found}


def test_a_shared_runtime_brings_its_events_to_every_service_using_it(client, auditor, team):
    shared = RuntimeFactory(team=team, name="vllm-shared")
    RevisionFactory(service__team=team, service__slug="kb-assistant", runtime=shared)
    RevisionFactory(service__team=team, service__slug="doc-translate", runtime=shared)
    services.update_runtime(shared, actor=None, engine_version="0.6.4")
    client.force_login(auditor)

    for slug in ("kb-assistant", "doc-translate"):
        found = client.get("/events/", {"service": slug}).context["page"].object_list
        assert "runtime.updated" in {e.action for e in found}, slug


def test_event_list_names_subject_types_as_people_read_them(client, auditor, history):
    client.force_login(auditor)

    page = client.get("/events/").content.decode()

    assert '<span class="muted small">Model asset</span>' in page
    assert '<span class="muted small">Capability</span>' in page
    assert '<option value="ledger.modelasset">Model asset</option>' in page
    assert ">ledger.modelasset<" not in page
    assert client.get("/events/", {"subject_type": "ledger.modelasset"}).status_code == 200


def test_event_list_shows_a_review_decision_and_its_comment(client, auditor, security, team):
    asset = ModelAssetFactory(team=team)
    services.set_license_approval(
        asset, actor=security, approval="rejected", comment="Non-commercial <b>only</b>"
    )
    client.force_login(auditor)

    page = client.get("/events/").content.decode()

    assert (
        '<span class="badge bad">rejected</span> <q>Non-commercial &lt;b&gt;only&lt;/b&gt;</q>'
        in page
    )


def test_event_filters_fold_into_details_and_the_busy_line_hides_without_scripts(
    client, auditor, history
):
    client.force_login(auditor)

    page = client.get("/events/", {"actor": "system", "action": "service."}).content.decode()

    assert '<details class="filter-panel" id="event-filters">' in page
    assert '<span class="badge info">2 active</span>' in page
    assert (
        '<span id="verify-indicator" class="htmx-indicator muted" role="status" hidden>'
        "Recomputing every hash…</span>"
    ) in page
