"""`/api/drills/`: plan, read and conclude a drill as the API's users would."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from releases.drills.services import record_drill_results
from releases.models import Drill
from tests.releases.factories import build_world
from tests.replay.factories import SampleFactory, SampleSetFactory

pytestmark = pytest.mark.django_db

BODY = {
    "name": "Support campaign",
    "services": ["kb-assistant"],
    "mix": [
        {"task_type": "chat", "sample_set": "peak-chat", "weight": 0.7},
        {"task_type": "sql", "sample_set": "peak-sql", "weight": 0.3},
    ],
    "arrival": {
        "type": "ramp",
        "stages": [{"duration_s": 30, "rate": 5}, {"duration_s": 60, "rate": 20}],
    },
    "bounds": {
        "chat": {"ttft_p95_ms": 800, "e2e_p95_ms": 4000},
        "sql": {"ttft_p95_ms": 1500, "e2e_p95_ms": 8000},
    },
    "seed": 11,
}


@pytest.fixture
def world(team):
    world = build_world(team, task_types=("chat", "sql"))
    for name in ("peak-chat", "peak-sql"):
        SampleFactory(sample_set=SampleSetFactory(name=name))
    return world


def api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_plan_read_and_conclude_through_the_api(world, sre, business):
    created = api(sre).post("/api/drills/", BODY, format="json")
    assert created.status_code == 201, created.json()
    drill = created.json()
    assert drill["state"] == "planned" and drill["services"] == ["kb-assistant"]
    assert drill["arrival"]["stages"][1] == {"duration_s": 60, "rate": 20.0}

    read = api(business).get(f"/api/drills/{drill['id']}/").json()
    assert read["seed"] == 11 and read["results"] is None
    assert [d["id"] for d in api(business).get("/api/drills/").json()["results"]] == [drill["id"]]

    early = api(business).post(
        f"/api/drills/{drill['id']}/conclusion/", {"protected": ["chat", "sql"]}, format="json"
    )
    assert early.status_code == 409 and early.json()["state"] == "planned"

    record_drill_results(Drill.objects.get(pk=drill["id"]), {"requests": 10}, actor=None)
    concluded = api(business).post(
        f"/api/drills/{drill['id']}/conclusion/", {"protected": ["chat", "sql"]}, format="json"
    )
    assert concluded.status_code == 200, concluded.json()
    assert concluded.json()["state"] == "concluded"
    assert concluded.json()["concluded_by"] == "ben"


def test_a_plan_that_cannot_run_answers_400_naming_each_field(world, sre):
    body = {**BODY, "mix": [{"task_type": "rag", "sample_set": "nope", "weight": -1}]}
    answer = api(sre).post("/api/drills/", body, format="json")
    assert answer.status_code == 400
    assert set(answer.json()) >= {"mix[0].task_type", "mix[0].sample_set", "mix[0].weight"}
    assert not Drill.objects.exists()


def test_who_may_plan_and_conclude(world, sre, auditor):
    assert api(auditor).post("/api/drills/", BODY, format="json").status_code == 403
    drill = api(sre).post("/api/drills/", BODY, format="json").json()
    record_drill_results(Drill.objects.get(pk=drill["id"]), {"requests": 10}, actor=None)
    refused = api(auditor).post(
        f"/api/drills/{drill['id']}/conclusion/", {"protected": ["chat", "sql"]}, format="json"
    )
    assert refused.status_code == 403
    assert APIClient().get("/api/drills/").status_code in (401, 403)


def test_odd_bodies_get_400_not_500(world, sre):
    client = api(sre)
    for body in ('{"name": "\\u0000"}', "[]", '{"mix": [[[[[]]]]]}', '"text"'):
        answer = client.post("/api/drills/", body, content_type="application/json")
        assert answer.status_code == 400, (body, answer.content)
