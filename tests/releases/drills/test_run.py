"""Running a drill against a real HTTP server on loopback (the suite's fake OpenAI server):
every planned start reaches it, each task type is judged against its own bounds, and the
results say so per task type, per stage, and at the knee."""

from __future__ import annotations

from collections import Counter
from io import StringIO

import pytest
from django.core.management import call_command

from ledger.models import Event, LoadTestReport
from releases.drills.plan import PlanRefused
from releases.drills.run import parts_of, run_drill
from releases.drills.services import plan_drill
from releases.models import Drill
from replay.models import Backend
from replay.openloop.shards import build_plan
from tests.releases.factories import build_world
from tests.replay.factories import BackendFactory, SampleFactory, SampleSetFactory
from tests.support.fake_openai import FakeOpenAI, Scenario, ServerConfig

pytestmark = pytest.mark.django_db(transaction=False)


@pytest.fixture
def server():
    # Any model name: the backend asks for the name the revision serves, as a real one would.
    config = ServerConfig(check_model=False, scenario=Scenario(tokens=2))
    with FakeOpenAI(config) as fake:
        yield fake


@pytest.fixture
def drill(team, sre, server):
    world = build_world(team, task_types=("chat", "sql"))
    Backend.objects.filter(revision=world.live).update(enabled=False)
    BackendFactory(
        name="a-drill-target",
        revision=world.live,
        base_url=server.base_url,
        model_name=world.live.model_asset.name,
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


def test_a_run_is_kept_as_load_test_evidence_of_the_revision_it_ran_against(
    drill, sre, server, client
):
    drill = run_drill(drill, actor=sre)

    live = drill.services.get().live_revision
    drilled = LoadTestReport.objects.filter(tool="drill")
    reports = {r.results["origin"]["task_type"]: r for r in drilled}
    assert set(reports) == {"chat", "sql"}
    by_type = drill.results["by_task_type"]
    for task_type, report in reports.items():
        assert report.revision == live
        assert report.tool == "drill" and report.format == "generic"
        assert report.requests == by_type[task_type]["requests"]
        assert report.has_request_data and report.model_verified and not report.mismatch
        assert report.results["origin"]["id"] == drill.pk
        # The raw file is kept: one JSON line per planned start of the task type.
        with report.raw_file.open("rb") as raw:
            lines = raw.read().splitlines()
        assert len(lines) == by_type[task_type]["planned"]
    # The workload class each task type needs; the rate its share of the drill's.
    assert reports["chat"].workload == "streaming"
    assert reports["sql"].workload == "structured"
    assert reports["chat"].levels[0]["conditions"]["request_rate"] == 7.5
    assert reports["sql"].levels[0]["conditions"]["request_rate"] == 2.5
    # Percentiles computed from the same requests the drill judged.
    assert reports["sql"].ttft_p95_ms == pytest.approx(by_type["sql"]["ttft_p95_ms"], abs=0.1)
    assert reports["chat"].levels[0]["conditions"]["output_tokens"]["mean"] > 0
    assert [(e["task_type"], e["workload"], e["report"]) for e in drill.results["evidence"]] == [
        ("chat", "streaming", reports["chat"].pk),
        ("sql", "structured", reports["sql"].pk),
    ]
    imported = Event.objects.filter(action="loadtest_report.imported")
    assert {e.payload_data["origin"]["task_type"] for e in imported} == {"chat", "sql"}

    # Each page points at the other.
    client.force_login(sre)
    report_url = f"/services/kb-assistant/r{live.number}/loadtests/{reports['sql'].pk}/"
    drill_page = client.get(f"/drills/{drill.pk}/").content.decode()
    assert "Kept as load-test evidence" in drill_page and report_url in drill_page
    report_page = client.get(report_url).content.decode()
    assert f'href="/drills/{drill.pk}/"' in report_page
    assert "from the requests of task type sql (25.0 % of the mix)" in report_page


def test_evidence_the_revision_would_refuse_is_reported_and_the_run_stands(drill, sre, server):
    Drill.objects.filter(pk=drill.pk).update(
        arrival={"type": "constant", "rate": 10, "duration_s": 1}
    )
    drill.refresh_from_db()
    Backend.objects.filter(name="a-drill-target").update(model_name="another-model")

    drill = run_drill(drill, actor=sre)

    assert drill.state == Drill.State.RAN and drill.results["requests"] == 10
    assert not LoadTestReport.objects.filter(tool="drill").exists()
    refused = {e["task_type"]: e["refused"] for e in drill.results["evidence"]}
    assert set(refused) == {"chat", "sql"}
    assert "another-model" in refused["sql"] and "accept_mismatch" in refused["sql"]


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
