"""'New revision from this one' keeps the source revision's capabilities, declared
again (issue 27 item 8a): without them every later diff listed them as removed
("breaks callers") and the owner re-typed each one."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from ledger import services
from ledger.models import Capability, Event, Revision
from tests.factories import PASSWORD
from tests.ledger.factories import RevisionFactory, ServiceFactory

pytestmark = pytest.mark.browser

DECLARED = {
    "context_length": 65536,
    "streaming": "sse",
    "structured_output": ["json_schema", "regex"],
}


@pytest.fixture
def source(team):
    service = ServiceFactory(team=team, slug="kb-assistant")
    # The runtime's max_model_len (32768) allows a copy with a context limit down to it.
    revision = RevisionFactory(service=service, context_limit=65536)
    for kind, value in DECLARED.items():
        services.declare_capability(revision, actor=None, kind=kind, value=value)
    services.record_capability_check(
        Capability.objects.get(revision=revision, kind="streaming"),
        actor=None,
        passed=True,
        evidence={"saw": "text/event-stream"},
    )
    return revision


def log_in(page, live_server, user):
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill(user.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Welcome")


def test_a_new_revision_from_this_one_declares_the_same_capabilities_again(
    live_server, page, owner, source
):
    log_in(page, live_server, owner)
    page.goto(f"{live_server.url}/services/kb-assistant/{source.label}/")
    page.get_by_role("button", name="New revision from this one").click()
    page.get_by_label("Gateway policy version").fill("gw-2")
    page.get_by_role("button", name="Create revision").click()

    copy = Revision.objects.get(service=source.service, number=source.number + 1)
    expect(page).to_have_url(f"{live_server.url}/services/kb-assistant/{copy.label}/")
    table = page.get_by_role("region", name="Capabilities").locator("table")
    for label in ("Context length (tokens)", "Streaming protocol", "Structured output modes"):
        expect(table.get_by_role("row").filter(has_text=label)).to_contain_text("declared")
    expect(table).not_to_contain_text("verified")

    copied = {c.kind: c for c in Capability.objects.filter(revision=copy)}
    assert {kind: c.value for kind, c in copied.items()} == DECLARED
    assert {c.status for c in copied.values()} == {Capability.Status.DECLARED}
    assert all(c.verified_at is None and c.evidence == {} for c in copied.values())
    payloads = [json.loads(e.payload) for e in Event.objects.filter(action="capability.declared")]
    copies = [p for p in payloads if p.get("copied_from") == source.label]
    assert sorted(p["after"]["kind"] for p in copies) == sorted(DECLARED)
    assert {p["after"]["status"] for p in copies} == {"declared"}
    # The source keeps its verification.
    assert Capability.objects.get(revision=source, kind="streaming").status == "verified"


def test_a_capability_the_new_parts_refuse_is_left_behind_and_said(
    live_server, page, owner, source
):
    log_in(page, live_server, owner)
    page.goto(f"{live_server.url}/services/kb-assistant/revisions/new?from={source.number}")
    page.get_by_label("Context limit").fill("32768")
    page.get_by_role("button", name="Create revision").click()

    expect(page.get_by_role("status")).to_contain_text(
        f"Not copied from {source.label}, as they do not fit this revision: context_length."
    )
    copy = Revision.objects.get(service=source.service, number=source.number + 1)
    assert set(Capability.objects.filter(revision=copy).values_list("kind", flat=True)) == {
        "streaming",
        "structured_output",
    }


def test_the_api_copy_declares_the_capabilities_again(client, owner, source):
    client.force_login(owner)

    response = client.post(
        f"/api/revisions/{source.pk}/new-revision/",
        {"gateway_policy_version": "gw-3"},
        content_type="application/json",
    )

    assert response.status_code == 201, response.content
    copy = Revision.objects.get(pk=response.json()["id"])
    assert dict(Capability.objects.filter(revision=copy).values_list("kind", "status")) == {
        kind: "declared" for kind in DECLARED
    }
