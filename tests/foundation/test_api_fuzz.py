"""Schemathesis over /api/schema/: no request the schema allows, or almost allows, is a 5xx,
and every response matches the schema.

Every phase runs: the schema's examples, the coverage phase (boundary values and
deliberately invalid ones for each parameter), bounded fuzzing, and a stateful
run that follows the links schemathesis infers between operations (create, then
read and change what was created). Once as an administrator and once as a model
owner, over a ledger whose rows hold the nulls real data holds (revisions made
by the system, reports without an uploader). Derandomized, so a run is
reproducible; each writing example runs in a savepoint that is rolled back.
"""

from __future__ import annotations

import copy

import pytest
import schemathesis
from django.db import transaction
from hypothesis import HealthCheck, settings
from rest_framework.permissions import SAFE_METHODS

from config.wsgi import application
from tests.foundation.api_data import TOKENS, served_schema

MAX_EXAMPLES = 5  # fuzzing only; the coverage phase generates its own deterministic cases
STATEFUL_SCENARIOS = 15
SEED = 20260109
NO_HEALTH_CHECKS = list(HealthCheck)


SPEC = served_schema()
# A sample set's JSONL body is text on the wire.
schemathesis.serializer.alias("application/x-ndjson", "text/plain")


def _schema_for(token: str, modes=("positive", "negative")):
    schema = schemathesis.openapi.from_dict(copy.deepcopy(SPEC))
    schema.app = application
    # Explicit headers, like `st run -H`: the coverage phase drops them for its
    # missing-credentials case, and checks that the API then refuses it.
    schema.config.update(headers={"Authorization": f"Token {token}"})
    schema.config.seed = SEED
    schema.config.generation.update(deterministic=True, database="none", modes=list(modes))
    checks = schema.config.checks
    # Schema-valid is not always acceptable: a reference to a missing object, a
    # digest of the wrong form or a domain rule refuses with a documented 400.
    checks.positive_data_acceptance.expected_statuses = [
        *checks.positive_data_acceptance.expected_statuses,
        "400",
    ]
    # Two conventions the API keeps: an empty query parameter means "no filter",
    # and DRF's text fields take a number as its text (0 → "0").
    checks.update(excluded_check_names=["negative_data_rejection"])
    return schema


as_admin = _schema_for(TOKENS["admin"])
as_owner = _schema_for(TOKENS["owner"], modes=("positive",))
HYPOTHESIS = settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=NO_HEALTH_CHECKS,
)


def _call(case) -> None:
    if case.method in SAFE_METHODS:
        case.call_and_validate()
        return
    # A savepoint per writing example: examples do not see each other's rows, and a
    # failed statement cannot leave the test's transaction aborted for the next one.
    with transaction.atomic():
        case.call_and_validate()
        transaction.set_rollback(True)


@as_admin.parametrize()
@HYPOTHESIS
def test_as_an_administrator(case, api_data, db, wsgi_calls):
    _call(case)


@as_owner.parametrize()
@HYPOTHESIS
def test_as_a_model_owner(case, api_data, db, wsgi_calls):
    _call(case)


@pytest.mark.parametrize("schema", [as_admin, as_owner], ids=["admin", "owner"])
def test_stateful_sequences(schema, api_data, db, wsgi_calls):
    class Workflow(schema.as_state_machine()):
        def setup(self):
            self._scenario = transaction.atomic()
            self._scenario.__enter__()

        def teardown(self):
            transaction.set_rollback(True)
            self._scenario.__exit__(None, None, None)

    Workflow.run(
        settings=settings(
            max_examples=STATEFUL_SCENARIOS,
            stateful_step_count=6,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=NO_HEALTH_CHECKS,
        )
    )


def test_the_fuzzed_schema_is_the_served_one(client, api_data, db):
    response = client.get("/api/schema/?format=json", HTTP_AUTHORIZATION=f"Token {TOKENS['admin']}")

    assert response.status_code == 200
    assert response.json() == SPEC
