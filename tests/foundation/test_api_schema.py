"""The schema says what the API returns: null where a value can be null, and every real
response of every list and detail endpoint validates against it."""

from __future__ import annotations

import copy
import inspect

import pytest
import schemathesis
from django.db import models
from rest_framework import serializers
from schemathesis.specs.openapi.checks import response_schema_conformance

import ledger.serializers
import replay.serializers
from config.wsgi import application
from releases.audit.serializers import exports as export_serializers
from releases.governance.serializers import incident as incident_serializers
from releases.governance.serializers import releases as release_serializers
from releases.governance.serializers import rollout as rollout_serializers
from releases.reviews.serializers import reviews as review_serializers
from tests.foundation.api_data import TOKENS, TRACE_ID, served_schema

SPEC = served_schema()


@pytest.mark.parametrize(
    ("component", "field"),
    [
        ("Revision", "created_by"),
        ("RevisionDetail", "created_by"),
        ("LoadTestReport", "uploaded_by"),
        ("LoadTestReportDetail", "uploaded_by"),
        ("SampleSet", "created_by"),
        ("SampleSetDetail", "created_by"),
        ("Run", "requested_by"),
        ("RunDetail", "requested_by"),
    ],
)
def test_who_made_it_is_declared_nullable(component, field):
    """The system makes revisions, reports and sets too, and accounts can be deleted."""
    declared = SPEC["components"]["schemas"][component]["properties"][field]

    assert declared["type"] == "string"
    assert declared.get("nullable") is True


def _api_serializers() -> list[type[serializers.ModelSerializer]]:
    found = []
    for module in (
        ledger.serializers,
        replay.serializers,
        release_serializers,
        rollout_serializers,
        incident_serializers,
        review_serializers,
        export_serializers,
    ):
        for _name, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, serializers.ModelSerializer):
                found.append(value)
    return found


def _nullable_step(model: type[models.Model], source_attrs: list[str]) -> str | None:
    """The first field along a dotted source that can be null, or None."""
    for name in source_attrs:
        try:
            field = model._meta.get_field(name)
        except Exception:
            return None  # a property or method: its type hint speaks for it
        if field.auto_created and not field.concrete:
            return None  # a reverse relation: a list, never null
        if field.null:
            return name
        if not field.is_relation:
            return None
        model = field.related_model
    return None


@pytest.mark.parametrize("serializer_class", _api_serializers(), ids=lambda c: c.__name__)
def test_every_field_that_can_be_null_is_declared_nullable(serializer_class):
    model = serializer_class.Meta.model
    undeclared = []
    for name, field in serializer_class().fields.items():
        if isinstance(field, serializers.SerializerMethodField) or field.source == "*":
            continue
        step = _nullable_step(model, field.source_attrs)
        if step is not None and not field.allow_null:
            undeclared.append(f"{name} (through {step})")

    assert undeclared == []


# ---------------------------------------------------------------- real responses


def _detail_parameters(data: dict) -> dict[str, list[dict]]:
    """Path parameters naming each seeded object, by path template."""
    revision, report = data["revision"], data["report"]
    runs = list(revision.replay_runs.order_by("pk"))
    capability = revision.capabilities.get()
    asset = revision.model_asset
    event = revision.service.events.order_by("sequence").first()
    return {
        "/api/assets/{id}/": [{"id": asset.pk}],
        "/api/capabilities/{id}/": [{"id": capability.pk}],
        "/api/events/{sequence}/": [{"sequence": event.sequence}],
        "/api/licenses/{spdx_id}/": [{"spdx_id": asset.license.spdx_id}],
        "/api/loadtests/{id}/": [{"id": report.pk}],
        "/api/releases/{id}/": [{"id": data["release"].pk}],
        "/api/releases/{id}/rollout/": [{"id": data["release"].pk}],
        "/api/releases/{id}/stages/{number}/observations/": [
            {"id": data["release"].pk, "number": 1}
        ],
        "/api/services/{slug}/rollbacks/": [{"slug": "kb-assistant"}],
        "/api/replay/backends/{name}/": [{"name": "kb-backend"}],
        "/api/replay/backends/{name}/probes/": [{"name": "kb-backend"}],
        "/api/replay/runs/{id}/": [{"id": run.pk} for run in runs],
        "/api/replay/sample-sets/{ref}/": [{"ref": "kb-smoke"}, {"ref": "kb-smoke@1"}],
        "/api/replay/sample-sets/{ref}/export/": [{"ref": "kb-smoke@1"}],
        "/api/revisions/{id}/": [{"id": revision.pk}],
        "/api/revisions/{id}/diff/{other_id}/": [{"id": revision.pk, "other_id": revision.pk}],
        "/api/revisions/{id}/cyclonedx/": [{"id": revision.pk}],
        "/api/runtimes/{name}/": [{"name": revision.runtime.name}],
        "/api/services/{slug}/": [{"slug": "kb-assistant"}, {"slug": "sql-agent"}],
        "/api/services/{slug}/serving/": [{"slug": "kb-assistant"}],
        "/api/services/{slug}/incident/": [{"slug": "kb-assistant"}, {"slug": "sql-agent"}],
        "/api/run-summaries/{id}/": [{"id": data["run_summary"].pk}],
        "/api/price-sheets/{id}/": [{"id": data["price_sheet"].pk}],
        "/api/services/{slug}/run-summaries/": [{"slug": "kb-assistant"}, {"slug": "sql-agent"}],
        "/api/services/{slug}/run-summaries/{date}/breakdown/": [
            {"slug": "kb-assistant", "date": data["run_summary"].date.isoformat()}
        ],
        "/api/services/{slug}/gateway-policies/": [{"slug": "kb-assistant"}],
        "/api/services/{slug}/gateway-policies/{version}/": [
            {"slug": "kb-assistant", "version": 1},
            {"slug": "kb-assistant", "version": 2},
        ],
        "/api/services/{slug}/gateway-policy/": [{"slug": "kb-assistant"}],
        "/api/services/{slug}/gateway/litellm/": [{"slug": "kb-assistant"}],
        "/api/teams/{slug}/": [{"slug": "kb-team"}],
        "/api/exports/{id}/": [{"id": data["export"].pk}],
        "/api/webhooks/{id}/": [{"id": data["subscription"].pk}],
        "/api/webhooks/{id}/deliveries/": [{"id": data["subscription"].pk}],
        "/api/reviews/{id}/": [{"id": data["review"].pk}],
        "/api/drills/{id}/": [{"id": data["drill"].pk}],
        "/api/explain/{trace_id}/": [{"trace_id": TRACE_ID}],
    }


def test_every_real_list_and_detail_response_matches_the_schema(api_data, db, wsgi_calls):
    schema = schemathesis.openapi.from_dict(copy.deepcopy(SPEC))
    schema.app = application
    headers = {"Authorization": f"Token {TOKENS['admin']}"}
    details = _detail_parameters(api_data)
    checked = []
    for path, operations in SPEC["paths"].items():
        if "get" not in operations:
            continue
        assert "{" not in path or path in details, f"add {path} to _detail_parameters"
        for parameters in details.get(path, [{}]):
            case = schema[path]["GET"].Case(path_parameters=parameters)
            response = case.call(headers=headers)
            assert response.status_code == 200, (path, parameters, response.text[:300])
            case.validate_response(response, checks=[response_schema_conformance])
            checked.append(path)

    # The rows hold the nulls this is about, and the lists are not empty.
    assert api_data["revision"].created_by is None
    assert api_data["report"].uploaded_by is None
    assert len(set(checked)) == sum("get" in ops for ops in SPEC["paths"].values())
