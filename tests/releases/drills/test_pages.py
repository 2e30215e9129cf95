"""The drill pages: list, plan form (refusals beside their fields), detail, conclusion."""

from __future__ import annotations

import pytest

from releases.drills.services import plan_drill, record_drill_results
from releases.models import Drill
from tests.releases.factories import build_world
from tests.replay.factories import SampleFactory, SampleSetFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(team):
    world = build_world(team, task_types=("chat", "sql"))
    for name in ("peak-chat", "peak-sql"):
        SampleFactory(sample_set=SampleSetFactory(name=name))
    SampleFactory(sample_set=SampleSetFactory(name="writes-tickets"), rerunnable=False)
    return world


def form(**overrides) -> dict:
    data = {
        "name": "Month-end close",
        "services": ["kb-assistant"],
        "task_1_task_type": "chat",
        "task_1_sample_set": "peak-chat",
        "task_1_weight": "70",
        "task_1_ttft_p95_ms": "800",
        "task_1_e2e_p95_ms": "4000",
        "task_2_task_type": "sql",
        "task_2_sample_set": "peak-sql",
        "task_2_weight": "30",
        "task_2_ttft_p95_ms": "1500",
        "task_2_e2e_p95_ms": "8000",
        "arrival_type": "ramp",
        "stages": "30 5\n60 20",
        "signers": ["platform_sre", "business_owner"],
    }
    data.update(overrides)
    return data


def test_the_empty_list_says_what_a_drill_is_for(client, sre):
    client.force_login(sre)
    page = client.get("/drills/").content.decode()
    assert "No drill has been planned yet" in page
    assert 'href="/drills/new/"' in page


def test_planning_in_the_browser_form_records_the_drill(client, world, sre):
    client.force_login(sre)
    assert client.get("/drills/new/").status_code == 200

    answer = client.post("/drills/new/", form())

    drill = Drill.objects.get()
    assert answer.status_code == 302 and answer["Location"] == f"/drills/{drill.pk}/"
    assert drill.arrival == {
        "type": "ramp",
        "stages": [{"duration_s": 30, "rate": 5.0}, {"duration_s": 60, "rate": 20.0}],
    }
    page = client.get(f"/drills/{drill.pk}/").content.decode()
    assert "Month-end close" in page and "70.0 %" in page
    # From 0 to 5/s over 30 s, then to 20/s over 60 s: 75 + 750 requests.
    assert "about 825 requests, peak 20.0/s" in page


def test_a_refusal_is_shown_beside_the_field_it_names_and_nothing_is_saved(client, world, sre):
    client.force_login(sre)
    answer = client.post(
        "/drills/new/", form(task_2_sample_set="writes-tickets", stages="30 5\nsixty 20")
    )
    assert answer.status_code == 400
    page = answer.content.decode()
    assert "line 2: expected seconds and a rate" in page
    assert not Drill.objects.exists()

    answer = client.post("/drills/new/", form(task_2_sample_set="writes-tickets"))
    page = answer.content.decode()
    assert answer.status_code == 400
    assert 'id="field-task_2_sample_set"' in page
    field = page.split('id="field-task_2_sample_set"', 1)[1].split("</div>", 1)[0]
    assert "has no re-runnable sample" in field
    assert not Drill.objects.exists()


def test_a_signer_concludes_on_the_page(client, world, sre, business):
    drill = plan_drill(
        {
            "name": "Campaign",
            "services": ["kb-assistant"],
            "mix": [{"task_type": "chat", "sample_set": "peak-chat", "weight": 1}],
            "arrival": {"type": "constant", "rate": 2, "duration_s": 10},
            "bounds": {"chat": {"ttft_p95_ms": 800, "e2e_p95_ms": 4000}},
        },
        actor=sre,
    )
    client.force_login(business)
    page = client.get(f"/drills/{drill.pk}/").content.decode()
    assert "Not run yet" in page and "Conclude the drill" not in page

    record_drill_results(drill, {"requests": 20, "achieved_rate": 2.0}, actor=None)
    page = client.get(f"/drills/{drill.pk}/").content.decode()
    assert "Conclude the drill" in page

    refused = client.post(f"/drills/{drill.pk}/conclude/", {})
    assert refused.status_code == 400
    assert "say of every task type whether it was protected or degraded" in (
        refused.content.decode()
    )
    done = client.post(f"/drills/{drill.pk}/conclude/", {"protected": ["chat"]})
    assert done.status_code == 302
    assert Drill.objects.get(pk=drill.pk).state == Drill.State.CONCLUDED


def test_who_may_plan_and_conclude_on_the_pages(client, world, auditor, sre):
    client.force_login(auditor)
    assert client.get("/drills/").status_code == 200
    assert client.get("/drills/new/").status_code == 403
    drill = plan_drill(
        {
            "name": "Campaign",
            "services": ["kb-assistant"],
            "mix": [{"task_type": "chat", "sample_set": "peak-chat", "weight": 1}],
            "arrival": {"type": "constant", "rate": 2, "duration_s": 10},
            "bounds": {"chat": {"ttft_p95_ms": 800, "e2e_p95_ms": 4000}},
        },
        actor=sre,
    )
    assert client.post(f"/drills/{drill.pk}/conclude/", {}).status_code == 403
    assert client.get("/drills/999999/").status_code == 404
