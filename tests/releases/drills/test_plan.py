"""A drill's plan: what can run as written is recorded with its Event; anything else is
refused naming the field and what would be accepted, and nothing is written."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied

from ledger.models import Event
from releases.drills.plan import DEFAULT_CEILING, PlanRefused
from releases.drills.services import plan_drill
from releases.models import Drill
from tests.factories import UserFactory
from tests.releases.factories import build_world
from tests.replay.factories import SampleFactory, SampleSetFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(team):
    return build_world(team, task_types=("chat", "sql"))


@pytest.fixture
def sets():
    chat = SampleSetFactory(name="peak-chat")
    SampleFactory.create_batch(3, sample_set=chat)
    sql = SampleSetFactory(name="peak-sql")
    SampleFactory(sample_set=sql)
    SampleFactory(sample_set=sql, rerunnable=False)
    side_effects = SampleSetFactory(name="writes-tickets")
    SampleFactory(sample_set=side_effects, rerunnable=False)
    return {"chat": chat, "sql": sql, "side_effects": side_effects}


def plan(**overrides) -> dict:
    body = {
        "name": "Month-end close",
        "business_event": "Finance closes the books",
        "window": {"starts_at": "2026-12-31T06:00:00Z", "ends_at": "2026-12-31T20:00:00Z"},
        "services": ["kb-assistant"],
        "mix": [
            {"task_type": "chat", "sample_set": "peak-chat", "weight": 70},
            {"task_type": "sql", "sample_set": "peak-sql@1", "weight": 30},
        ],
        "arrival": {"type": "constant", "rate": 20, "duration_s": 60},
        "bounds": {
            "chat": {"ttft_p95_ms": 800, "e2e_p95_ms": 4000},
            "sql": {"ttft_p95_ms": 1500, "e2e_p95_ms": 8000, "degrade_to": "support-faq"},
        },
        "seed": 42,
    }
    body.update(overrides)
    return body


def test_a_plan_that_can_run_is_recorded_with_its_event(world, sets, sre):
    drill = plan_drill(plan(), actor=sre)

    assert drill.state == Drill.State.PLANNED
    assert [s.slug for s in drill.services.all()] == ["kb-assistant"]
    assert [(e["task_type"], e["sample_set"], e["weight"]) for e in drill.mix] == [
        ("chat", sets["chat"].pk, 70.0),
        ("sql", sets["sql"].pk, 30.0),
    ]
    assert drill.mix[1]["rerunnable_samples"] == 1  # the one with side effects is not sent
    assert drill.seed == 42 and drill.in_flight_ceiling == DEFAULT_CEILING
    assert drill.signers == ["platform_sre", "business_owner"]
    # Left out of the plan, the failure message comes from the gateway policy in force.
    assert drill.bounds["chat"]["failure_message"] == "The assistant is busy; try again shortly."
    assert drill.bounds["sql"]["degrade_to"] == "support-faq"
    event = Event.objects.get(action="drill.planned")
    assert event.payload_data["mix"] == drill.mix and event.payload_data["seed"] == 42


def test_a_seed_left_out_is_drawn_and_recorded(world, sets, sre):
    body = plan()
    del body["seed"]
    drill = plan_drill(body, actor=sre)
    assert Event.objects.get(action="drill.planned").payload_data["seed"] == drill.seed
    assert 0 <= drill.seed < 2**63


@pytest.mark.parametrize(
    ("overrides", "path", "words"),
    [
        ({"name": ""}, "name", "required"),
        ({"services": ["nope"]}, "services[0]", "no service 'nope'"),
        (
            {"mix": [{"task_type": "chat", "sample_set": "writes-tickets", "weight": 1}]},
            "mix[0].sample_set",
            "writes-tickets@1 has no re-runnable sample",
        ),
        (
            {"mix": [{"task_type": "rag", "sample_set": "peak-chat", "weight": 1}]},
            "mix[0].task_type",
            "'rag' is not a task type the services in scope serve (chat, sql)",
        ),
        (
            {
                "mix": [
                    {"task_type": "chat", "sample_set": "peak-chat", "weight": 0},
                    {"task_type": "sql", "sample_set": "peak-sql", "weight": 0},
                ]
            },
            "mix",
            "the weights add up to 0",
        ),
        ({"arrival": {"type": "burst"}}, "arrival.type", "expected constant, poisson or ramp"),
        (
            {"arrival": {"type": "ramp", "stages": [{"duration_s": 30, "rate": 0}]}},
            "arrival.stages",
            "every stage's rate is 0",
        ),
        (
            {"arrival": {"type": "poisson", "rate": 100, "duration_s": 60}},
            "arrival.rate",
            "100 requests/s taking up to 8 s each keep 800 in flight, above the in-flight "
            "ceiling of 256: lower the peak to 32/s or raise in_flight_ceiling to 800",
        ),
        (
            {"bounds": {"chat": {"ttft_p95_ms": 800, "e2e_p95_ms": 4000}}},
            "bounds.sql",
            "needs its acceptable p95 TTFT and end to end",
        ),
        (
            {"capacity": {"extra_replicas": 2}},
            "capacity.owner",
            "a scale-up needs the person who owns it",
        ),
        ({"revision": 999999}, "revision", "kb-assistant has no revision with id 999999"),
        ({"signers": ["auditor"]}, "signers", "expected a list of roles among"),
    ],
)
def test_a_plan_that_cannot_run_is_refused_naming_the_field(
    world, sets, sre, overrides, path, words
):
    with pytest.raises(PlanRefused) as refused:
        plan_drill(plan(**overrides), actor=sre)

    assert words in refused.value.errors[path], refused.value.errors
    assert not Drill.objects.exists()
    assert not Event.objects.filter(action="drill.planned").exists()


def test_odd_input_is_refused_not_crashed(world, sets, sre):
    for body in (
        [],
        plan(name="\x00"),
        plan(mix="chat"),
        plan(arrival={"type": "constant", "rate": float("nan"), "duration_s": 1}),
        plan(window={"starts_at": "yesterday"}),
        plan(mix=[{"task_type": "chat", "sample_set": "x@\ud800", "weight": 1}]),
    ):
        with pytest.raises(PlanRefused):
            plan_drill(body, actor=sre)


def test_only_platform_or_the_services_model_owners_plan_a_drill(world, sets, owner):
    assert plan_drill(plan(), actor=owner).created_by == owner  # owner is in the team
    outsider = UserFactory(username="mallory", roles=["model_owner"])
    with pytest.raises(PermissionDenied):
        plan_drill(plan(), actor=outsider)
