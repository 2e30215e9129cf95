"""GET /api/revisions/{id}/diff/{other_id}/: the revision diff over REST."""

from __future__ import annotations

import pytest

from ledger import services
from tests.ledger.factories import RevisionFactory, RuntimeFactory, ServiceFactory


@pytest.fixture
def kb(team):
    """kb-assistant r1 (tool calling, 32k context) and r2 (no tool calling, 8k context)."""
    service = ServiceFactory(team=team, slug="kb-assistant")
    r1 = RevisionFactory(service=service)
    small = RuntimeFactory(team=team, launch_parameters={"max_model_len": 8192})
    r2 = services.new_revision_from(
        r1, actor=None, runtime=small, context_limit=8192, gateway_policy_version="gw-2"
    )
    services.declare_capability(r1, actor=None, kind="tool_calling", value=True)
    services.declare_capability(r2, actor=None, kind="tool_calling", value=False)
    return r1, r2


def test_diff_returns_every_change_breaking_first_in_the_documented_shape(client, sre, kb):
    r1, r2 = kb
    client.force_login(sre)

    response = client.get(f"/api/revisions/{r1.pk}/diff/{r2.pk}/")

    assert response.status_code == 200
    body = response.json()
    assert list(body) == ["changes"]
    changes = body["changes"]
    assert all(list(change) == ["field", "from", "to", "breaking", "why"] for change in changes)
    assert [(c["field"], c["breaking"]) for c in changes] == [
        ("capabilities.tool_calling", True),
        ("context_limit", True),
        ("launch_parameters.max_model_len", True),
        ("gateway_policy_version", False),
        ("image_digest", False),
        ("launch_parameters.tensor_parallel_size", False),
    ]
    assert changes[1] == {
        "field": "context_limit",
        "from": 32768,
        "to": 8192,
        "breaking": True,
        "why": "context window shrinks from 32768 to 8192 tokens: requests longer than 8192 "
        "tokens will be refused",
    }
    assert changes[0]["from"] is True
    assert changes[0]["to"] is False
    # A flag the to-revision no longer sets reads null.
    assert changes[5]["from"] == 1
    assert changes[5]["to"] is None


def test_diff_of_a_revision_with_itself_is_empty(client, auditor, kb):
    r1, _ = kb
    client.force_login(auditor)

    assert client.get(f"/api/revisions/{r1.pk}/diff/{r1.pk}/").json() == {"changes": []}


def test_diff_answers_404_naming_the_revision_that_does_not_exist(client, sre, kb):
    r1, _ = kb
    client.force_login(sre)

    other_missing = client.get(f"/api/revisions/{r1.pk}/diff/999999/")
    this_missing = client.get(f"/api/revisions/999998/diff/{r1.pk}/")
    both_missing = client.get("/api/revisions/999998/diff/999999/")

    assert other_missing.status_code == 404
    assert other_missing.json() == {"detail": "There is no revision 999999."}
    assert this_missing.json() == {"detail": "There is no revision 999998."}
    assert both_missing.json() == {"detail": "There are no revisions 999998 and 999999."}
    assert client.get(f"/api/revisions/{r1.pk}/diff/abc/").status_code == 404


def test_diff_refuses_revisions_of_two_services(client, sre, kb, team):
    r1, _ = kb
    other = RevisionFactory(service=ServiceFactory(team=team, slug="dataagent-sql"))
    client.force_login(sre)

    response = client.get(f"/api/revisions/{r1.pk}/diff/{other.pk}/")

    assert response.status_code == 400
    assert response.json() == {
        "other_id": [
            f"Diffs compare revisions of one service: revision {r1.pk} is kb-assistant r1, "
            f"revision {other.pk} is dataagent-sql r1."
        ]
    }


def test_diff_needs_a_signed_in_caller_and_only_reads(client, owner, kb):
    r1, r2 = kb
    url = f"/api/revisions/{r1.pk}/diff/{r2.pk}/"

    assert client.get(url).status_code == 401
    client.force_login(owner)
    assert client.post(url, {}).status_code == 405


def test_diff_runs_a_constant_number_of_queries(client, sre, kb, django_assert_num_queries):
    r1, r2 = kb
    client.force_login(sre)

    # session, user, both revisions with service, team, asset and runtime, the
    # capabilities of both.
    with django_assert_num_queries(4):
        response = client.get(f"/api/revisions/{r1.pk}/diff/{r2.pk}/")
    assert len(response.json()["changes"]) == 6


def test_schema_documents_the_diff_its_shape_and_its_refusals(client, auditor):
    client.force_login(auditor)

    schema = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()

    operation = schema["paths"]["/api/revisions/{id}/diff/{other_id}/"]["get"]
    assert set(operation["responses"]) == {"200", "400", "401", "404"}
    assert "different services" in operation["responses"]["400"]["description"]
    parameters = {p["name"]: p for p in operation["parameters"]}
    assert parameters["other_id"]["schema"]["type"] == "integer"
    ref = operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    diff = schema["components"]["schemas"][ref.rsplit("/", 1)[-1]]
    item_ref = diff["properties"]["changes"]["items"]["$ref"]
    change = schema["components"]["schemas"][item_ref.rsplit("/", 1)[-1]]
    assert list(change["properties"]) == ["field", "from", "to", "breaking", "why"]
    assert set(change["required"]) == {"field", "from", "to", "breaking", "why"}
