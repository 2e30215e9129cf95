"""Gateway policy versions: the schema (each bad value named by its path), versions and
their Events, immutability, a revision naming a version, and the API."""

from __future__ import annotations

import copy

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, ProgrammingError, transaction

from ledger import services
from ledger.fingerprint import compute_fingerprint
from ledger.gateway_policy import EXAMPLE, document_sha256, openapi_schema, schema_problems
from ledger.models import Event, GatewayPolicy
from tests.ledger.factories import RevisionFactory, ServiceFactory


@pytest.fixture
def kb(team):
    """kb-assistant serves chat and sql to support and legal; support-faq and kb-long
    take what it cannot answer."""
    ServiceFactory(slug="support-faq", team=team)
    ServiceFactory(slug="kb-long", team=team)
    return ServiceFactory(
        slug="kb-assistant",
        team=team,
        task_types=["chat", "sql"],
        tenants=["support", "legal"],
    )


def full_document() -> dict:
    document = copy.deepcopy(EXAMPLE)
    document["fallbacks"].insert(0, {"on": "context_window", "to_service": "kb-long"})
    document["tenants"].append({"name": "legal", "rpm": 60, "tpm": 20000})
    return document


def refusal(service, document, actor) -> list[str]:
    with pytest.raises(ValidationError) as refused:
        services.create_gateway_policy(service, actor=actor, document=document)
    return refused.value.message_dict["document"]


def test_every_field_of_the_documented_example_is_accepted(kb, owner):
    policy = services.create_gateway_policy(kb, actor=owner, document=full_document())

    assert (policy.version, policy.label, policy.known) == (1, "v1", True)
    assert policy.document == full_document()
    assert schema_problems(full_document()) == []


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda d: d["limits"].update(max_output_tokens=-5),
            "limits.max_output_tokens: -5 is less than the minimum of 1",
        ),
        (
            lambda d: d["limits"].update(timeout_s=0),
            "limits.timeout_s: 0 is less than or equal to the minimum of 0",
        ),
        (
            lambda d: d["tenants"][0].update(rpm="600"),
            "tenants[0].rpm: '600' is not of type 'integer'",
        ),
        (
            lambda d: d["tenants"][0]["budget"].update(currency="EUR"),
            "tenants[0].budget.currency: 'EUR' is not one of ['USD']",
        ),
        (
            lambda d: d["degradation"]["sql"].pop("message"),
            "degradation.sql: 'message' is a required property",
        ),
        (
            lambda d: d["degradation"]["chat"].pop("to_service"),
            "degradation.chat: 'to_service' is a required property",
        ),
        (
            lambda d: d["fallbacks"].append({"on": "sometimes", "to_service": "kb-long"}),
            "fallbacks[2].on: 'sometimes' is not one of ['context_window', 'error', "
            "'content_policy']",
        ),
        (
            lambda d: d.update(quotas={}),
            "(the document): Additional properties are not allowed ('quotas' was unexpected)",
        ),
    ],
)
def test_a_bad_value_is_refused_naming_its_path(kb, owner, change, expected):
    document = full_document()
    change(document)

    assert refusal(kb, document, owner) == [expected]
    assert not GatewayPolicy.objects.filter(service=kb).exists()


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda d: d["tenants"].append({"name": "support", "rpm": 1}),
            "tenants[2].name: support is listed twice.",
        ),
        (
            lambda d: d["fallbacks"].append({"on": "error", "to_service": "kb-assistant"}),
            "fallbacks[2].to_service: kb-assistant cannot fall back to itself.",
        ),
        (
            lambda d: d["fallbacks"].append({"on": "error", "to_service": "no-such-service"}),
            "fallbacks[2].to_service: there is no service no-such-service.",
        ),
        (
            lambda d: d["degradation"].update(poetry={"action": "async_queue"}),
            "degradation.poetry: poetry is not a known task type.",
        ),
        (
            lambda d: d["tenants"].append({"name": "sales", "rpm": 10}),
            "tenants[2].name: sales is not a tenant of kb-assistant (its tenants: support, "
            "legal); add it to the service first.",
        ),
    ],
)
def test_what_only_the_registry_knows_is_refused_naming_its_path(kb, owner, change, expected):
    document = full_document()
    change(document)

    assert refusal(kb, document, owner) == [expected]


def test_a_task_type_the_service_does_not_serve_is_refused(kb, owner):
    ServiceFactory(slug="reports", team=kb.team, task_types=["summarization"])
    document = full_document()
    document["degradation"]["summarization"] = {"action": "async_queue"}

    assert refusal(kb, document, owner) == [
        "degradation.summarization: kb-assistant does not serve summarization "
        "(it serves chat, sql)."
    ]


def test_each_version_is_an_event_with_its_hash_and_the_next_number(kb, owner):
    first = services.create_gateway_policy(kb, actor=owner, document=full_document())
    changed = full_document()
    changed["limits"]["max_output_tokens"] = 4096
    second = services.create_gateway_policy(kb, actor=owner, document=changed, note="longer")

    assert [first.label, second.label] == ["v1", "v2"]
    events = Event.objects.filter(action="gateway_policy.created").order_by("sequence")
    assert [e.payload_data["sha256"] for e in events] == [first.sha256, second.sha256]
    assert second.sha256 == document_sha256(changed) != first.sha256
    assert events.last().payload_data["document"]["limits"]["max_output_tokens"] == 4096


def test_only_model_owners_of_the_team_record_a_version(kb, sre):
    with pytest.raises(Exception, match="Only model owners of team 'kb-team'"):
        services.create_gateway_policy(kb, actor=sre, document=full_document())


def test_a_version_is_never_rewritten_in_the_database(kb, owner):
    policy = services.create_gateway_policy(kb, actor=owner, document=full_document())

    with pytest.raises(ProgrammingError, match="Cannot update"), transaction.atomic():
        GatewayPolicy.objects.filter(pk=policy.pk).update(document={"limits": {}})
    with pytest.raises(IntegrityError), transaction.atomic():
        GatewayPolicy.objects.create(
            service=kb, version=1, label="v9", document=None, sha256=document_sha256(None)
        )


def test_a_revision_names_a_version_and_its_document_counts_in_the_fingerprint(kb, owner):
    services.create_gateway_policy(kb, actor=owner, document=full_document())
    by_name = RevisionFactory(service=kb, gateway_policy_version="gw-2026.03")
    versioned = services.new_revision_from(by_name, actor=owner, gateway_policy_version="v1")

    assert by_name.gateway_policy.known is False
    assert by_name.gateway_policy_version == "gw-2026.03"
    assert versioned.gateway_policy.label == "v1"
    parts = (by_name.model_asset, by_name.runtime, by_name.context_limit)
    # A version known by name only adds nothing: fingerprints from before stay.
    assert by_name.fingerprint == compute_fingerprint(*parts)
    assert versioned.fingerprint == compute_fingerprint(*parts, versioned.gateway_policy)
    assert versioned.fingerprint != by_name.fingerprint


def test_a_name_only_version_is_recorded_once_as_unknown(kb, owner):
    first = RevisionFactory(service=kb, gateway_policy_version="gw-7")
    second = RevisionFactory(service=kb, gateway_policy_version="gw-7")

    assert first.gateway_policy_id == second.gateway_policy_id
    event = Event.objects.get(action="gateway_policy.created")
    assert event.payload_data["known"] is False
    assert event.payload_data["label"] == "gw-7"


def test_a_version_number_that_does_not_exist_is_refused_naming_those_that_do(kb, owner):
    services.create_gateway_policy(kb, actor=owner, document=full_document())

    with pytest.raises(ValidationError) as refused:
        RevisionFactory(service=kb, gateway_policy_version="v7")

    assert refused.value.message_dict["gateway_policy_version"] == [
        "kb-assistant has no gateway policy v7 (it has v1); record the policy first on its "
        "gateway policy page."
    ]


def test_the_published_schema_is_openapi_3_0(kb):
    published = openapi_schema()

    text = repr(published)
    assert "'if'" not in text and "propertyNames" not in text and "$schema" not in text
    assert published["properties"]["limits"]["properties"]["timeout_s"] == {
        "type": "number",
        "minimum": 0,
        "exclusiveMinimum": True,
        "description": "Whole request, in seconds.",
    }
    assert published["example"] == EXAMPLE


# ---------------------------------------------------------------- the API


def test_post_records_a_version_and_answers_201_with_it(client, kb, owner):
    client.force_login(owner)

    response = client.post(
        "/api/services/kb-assistant/gateway-policies/",
        {"document": full_document(), "note": "first"},
        content_type="application/json",
    )

    assert response.status_code == 201, response.content
    assert response.json()["version"] == 1
    assert response.json()["label"] == "v1"
    assert response.json()["sha256"] == document_sha256(full_document())


def test_post_names_each_problem_by_its_path(client, kb, owner):
    document = full_document()
    document["limits"]["max_input_tokens"] = 0
    client.force_login(owner)

    response = client.post(
        "/api/services/kb-assistant/gateway-policies/",
        {"document": document},
        content_type="application/json",
    )

    assert response.status_code == 400
    assert response.json() == {
        "document": ["limits.max_input_tokens: 0 is less than the minimum of 1"]
    }


def test_post_by_someone_outside_the_team_is_403(client, kb, sre):
    client.force_login(sre)

    response = client.post(
        "/api/services/kb-assistant/gateway-policies/",
        {"document": full_document()},
        content_type="application/json",
    )

    assert response.status_code == 403
    assert not GatewayPolicy.objects.exists()


def test_get_lists_versions_newest_first_and_reads_one(client, kb, owner, auditor):
    services.create_gateway_policy(kb, actor=owner, document=full_document())
    services.create_gateway_policy(kb, actor=owner, document={"limits": {"timeout_s": 30}})
    client.force_login(auditor)

    listed = client.get("/api/services/kb-assistant/gateway-policies/").json()
    one = client.get("/api/services/kb-assistant/gateway-policies/1/")

    rows = listed["results"] if isinstance(listed, dict) else listed
    assert [row["label"] for row in rows] == ["v2", "v1"]
    assert one.json()["document"] == full_document()
    assert client.get("/api/services/kb-assistant/gateway-policies/9/").status_code == 404


def test_the_version_in_force_is_the_live_revisions(client, kb, owner, auditor):
    services.create_gateway_policy(kb, actor=owner, document=full_document())
    client.force_login(auditor)
    assert client.get("/api/services/kb-assistant/gateway-policy/").status_code == 404

    revision = RevisionFactory(service=kb, gateway_policy_version="v1")
    services.set_live_revision(kb, revision, actor=None, reason="first")
    response = client.get("/api/services/kb-assistant/gateway-policy/")

    assert response.status_code == 200
    assert response.json() == {
        "version": "v1",
        "revision": revision.label,
        "known": True,
        "sha256": document_sha256(full_document()),
        "document": full_document(),
    }


def test_naming_a_new_policy_records_it_only_for_the_team(kb, sre):
    from django.core.exceptions import PermissionDenied

    with pytest.raises(PermissionDenied):
        services.policy_named(kb, "gw-8", actor=sre)
    assert not GatewayPolicy.objects.filter(label="gw-8").exists()


@pytest.mark.parametrize(
    ("label", "expected"),
    [
        ("gw " + "x", "Expected a name such as"),
        ("gw-" + "9" * 40, "Ensure this value has at most 40 characters (it has 43)."),
    ],
)
def test_a_policy_name_that_cannot_be_a_label_is_refused_naming_the_field(
    kb, owner, label, expected
):
    with pytest.raises(ValidationError) as refused:
        services.policy_named(kb, label, actor=owner)

    assert expected in refused.value.message_dict["gateway_policy_version"][0]
    assert not GatewayPolicy.objects.exists()
