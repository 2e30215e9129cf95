"""Running a drill against a real HTTP server on loopback (the suite's fake OpenAI server):
every planned start reaches it, each task type is judged against its own bounds, and the
results say so per task type, per stage, and at the knee."""

from __future__ import annotations

from collections import Counter
from io import StringIO

import pytest
from django.core.management import call_command

from ledger.models import Event
from releases.drills.plan import PlanRefused
from releases.drills.run import parts_of, run_drill
from releases.drills.services import plan_drill
from releases.models import Drill
from replay.models import Backend
from replay.openloop.shards import build_plan
from tests.releases.factories import build_world
from tests.replay.factories import BackendFactory, SampleFactory, SampleSetFactory
from tests.support.fake_openai import FakeOpenAI

pytestmark = pytest.mark.django_db(transaction=False)


@pytest.fixture
def server():
    with FakeOpenAI(tokens=2) as fake:
        yield fake


@pytest.fixture
def drill(team, sre, server):
    world = build_world(team, task_types=("chat", "sql"))
    Backend.objects.filter(revision=world.live).update(enabled=False)
    BackendFactory(
        name="a-drill-target",
        revision=world.live,
        base_url=server.base_url,
        model_name=server.config.model,
        concurrency_limit=1,  # a replay limit, which a drill does not apply
    )
    chat = SampleSetFactory(name="peak-chat")
    for key in ("c1", "c2"):
        SampleFactory(sample_set=chat, key=key, messages=[{"role": "user", "content": "Hi."}])
    sql = SampleSetFactory(name="peak-sql")
    SampleFactory(
        sample_set=sql,
        key="slow-sql",
        messages=[{"role": "user", "content": "Count rows.\nfake: ttft_ms=400"}],
    )
    return plan_drill(
        {
            "name": "Month-end close",
            "services": ["kb-assistant"],
            "mix": [
                {"task_type": "chat", "sample_set": "peak-chat", "weight": 3},
                {"task_type": "sql", "sample_set": "peak-sql", "weight": 1},
            ],
            "arrival": {
                "type": "ramp",
                "stages": [{"duration_s": 2, "rate": 10}, {"duration_s": 2, "rate": 10}],
            },
            "bounds": {
                "chat": {"ttft_p95_ms": 5000, "e2e_p95_ms": 10000},
                "sql": {"ttft_p95_ms": 100, "e2e_p95_ms": 10000},
            },
            "seed": 5,
        },
        actor=sre,
    )


def test_a_run_sends_every_planned_start_and_judges_each_task_type(drill, sre, server):
    planned = build_plan(parts_of(drill)[0].spec).arrivals()

    drill = run_drill(drill, actor=sre)

    results = drill.results
    assert drill.state == Drill.State.RAN
    # The server's own log: one chat request per planned start, none dropped.
    assert len(server.chat_requests) == len(planned) == results["requests"] == 30
    assert results["dropped_starts"] == 0
    by_type = Counter(a.task_type for a in planned)
    assert {t: row["requests"] for t, row in results["by_task_type"].items()} == by_type
    chat, sql = results["by_task_type"]["chat"], results["by_task_type"]["sql"]
    assert chat["verdict"] in ("met", "inconclusive")  # late starts on a busy machine
    assert sql["verdict"] == "missed"
    assert any(reason.startswith("p95 TTFT") for reason in sql["reasons"])
    assert sql["ttft_p95_ms"] >= 400  # the server held the first token that long
    assert [stage["rate"] for stage in results["stages"]] == [10, 10]
    assert results["knee_rate"] is None  # sql missed in every stage
    assert results["parts"] == [
        {
            "service": "kb-assistant",
            "revision": drill.services.get().live_revision.label,
            "backend": "a-drill-target",
            "task_types": ["chat", "sql"],
            "share": 1.0,
            "planned": 30,
            "counted": 30,
        }
    ]
    event = Event.objects.get(action="drill.ran")
    assert event.payload_data["verdicts"] == {"chat": chat["verdict"], "sql": "missed"}


def test_the_command_runs_it_and_prints_the_table(drill, server):
    out = StringIO()
    call_command("run_drill", str(drill.pk), stdout=out)
    text = out.getvalue()
    assert "sql" in text and "missed" in text
    assert f"{len(server.chat_requests)} requests" in text


def test_a_drill_with_nowhere_to_send_is_refused_before_anything_is_sent(drill, sre, server):
    Backend.objects.filter(name="a-drill-target").update(enabled=False)
    with pytest.raises(PlanRefused) as refused:
        run_drill(drill, actor=sre)
    assert "has no enabled backend" in refused.value.errors["services.kb-assistant"]
    assert server.chat_requests == []
    assert Drill.objects.get(pk=drill.pk).state == Drill.State.PLANNED
