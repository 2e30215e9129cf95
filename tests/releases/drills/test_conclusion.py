"""A drill is concluded only once it ran and every part is answered: what was protected
and what degraded, the scale-up reclaimed or an open action, its temporary cost."""

from __future__ import annotations

import datetime as dt

import pytest
from django.core.exceptions import PermissionDenied

from ledger.models import Event
from releases.drills.plan import PlanRefused
from releases.drills.services import conclude_drill, plan_drill, record_drill_results
from releases.governance.services.errors import TransitionRefused
from releases.models import BlackoutWindow, Drill
from tests.releases.factories import build_world
from tests.replay.factories import SampleFactory, SampleSetFactory

pytestmark = pytest.mark.django_db

STARTS = dt.datetime(2026, 12, 31, 6, tzinfo=dt.UTC)


@pytest.fixture
def drill(team, sre):
    build_world(team, task_types=("chat", "sql"))
    for name in ("peak-chat", "peak-sql"):
        SampleFactory(sample_set=SampleSetFactory(name=name))
    return plan_drill(
        {
            "name": "Month-end close",
            "window": {"starts_at": STARTS.isoformat(), "ends_at": "2026-12-31T20:00:00Z"},
            "services": ["kb-assistant"],
            "mix": [
                {"task_type": "chat", "sample_set": "peak-chat", "weight": 3},
                {"task_type": "sql", "sample_set": "peak-sql", "weight": 1},
            ],
            "arrival": {"type": "constant", "rate": 5, "duration_s": 30},
            "bounds": {
                "chat": {"ttft_p95_ms": 800, "e2e_p95_ms": 4000},
                "sql": {"ttft_p95_ms": 1500, "e2e_p95_ms": 8000},
            },
            "capacity": {
                "extra_replicas": 2,
                "pool": "h100-burst",
                "owner": "sam",
                "reclaim_by": "2027-01-01T08:00:00Z",
            },
            "seed": 7,
        },
        actor=sre,
    )


def ran(drill, sre) -> Drill:
    return record_drill_results(
        drill,
        {"requests": 150, "achieved_rate": 5.0, "late_starts": 0, "dropped_starts": 0},
        actor=sre,
    )


def test_a_planned_drill_cannot_be_concluded(drill, sre):
    with pytest.raises(TransitionRefused, match="only a drill that ran can be concluded"):
        conclude_drill(drill, {"protected": ["chat", "sql"]}, actor=sre)


def test_every_part_must_be_answered(drill, sre):
    drill = ran(drill, sre)
    with pytest.raises(PlanRefused) as refused:
        conclude_drill(drill, {"protected": ["chat"]}, actor=sre)
    assert "sql" in refused.value.errors["protected"]

    with pytest.raises(PlanRefused) as refused:
        conclude_drill(drill, {"protected": ["chat"], "degraded": ["sql"]}, actor=sre)
    assert "failure message" in refused.value.errors["failure_message_seen"]
    assert "reclaimed" in refused.value.errors["reclaimed_at"]  # the scale-up

    assert Drill.objects.get(pk=drill.pk).state == Drill.State.RAN
    assert not Event.objects.filter(action="drill.concluded").exists()


def test_a_reclaimed_scale_up_is_priced_and_the_peak_goes_on_the_calendar(drill, sre):
    drill = ran(drill, sre)
    reclaimed = STARTS + dt.timedelta(hours=10)

    drill = conclude_drill(
        drill,
        {
            "protected": ["chat"],
            "degraded": ["sql"],
            "failure_message_seen": True,
            "reclaimed_at": reclaimed.isoformat(),
            "reclaimed_by": "sam",
            "throttles": "field-service at 60 rpm during the close",
            "blackout": True,
        },
        actor=sre,
    )

    assert drill.state == Drill.State.CONCLUDED and drill.concluded_by == sre
    # 2 extra replicas of one H100 for 10 hours at 2.45 USD (build_world's price sheet).
    assert drill.conclusion["temporary_cost"] == {
        "gpu_hours": "20.00",
        "gpu_model": "H100-80GB",
        "cost": "49.00",
        "currency": "USD",
    }
    [window] = BlackoutWindow.objects.filter(pk__in=drill.conclusion["blackout_windows"])
    assert (window.starts_at, window.service.slug) == (STARTS, "kb-assistant")
    event = Event.objects.get(action="drill.concluded")
    assert event.payload_data["degraded"] == ["sql"]


def test_an_open_action_stands_for_a_scale_up_not_yet_reclaimed(drill, sre):
    drill = conclude_drill(
        ran(drill, sre),
        {"protected": ["chat", "sql"], "action_owner": "sam", "action_due_on": "2027-01-02"},
        actor=sre,
    )
    assert drill.conclusion["open_action"] == {"owner": "sam", "due_on": "2027-01-02"}
    # Priced up to the planned reclaim: 26 hours of 2 GPUs.
    assert drill.conclusion["temporary_cost"]["gpu_hours"] == "52.00"


def test_only_the_named_signers_conclude(drill, sre, auditor):
    drill = ran(drill, sre)
    with pytest.raises(PermissionDenied):
        conclude_drill(drill, {"protected": ["chat", "sql"]}, actor=auditor)


def test_the_auditors_record_carries_the_drill_and_its_conclusion(drill, sre):
    from releases.audit.records import RECORD_TYPES, AuditFilters

    drill = conclude_drill(
        ran(drill, sre),
        {"protected": ["chat", "sql"], "action_owner": "sam", "action_due_on": "2027-01-02"},
        actor=sre,
    )
    record = RECORD_TYPES["drills"]
    [row] = list(record.rows(record.queryset(AuditFilters(service="kb-assistant"))))
    cells = dict(zip(record.columns, row, strict=True))
    assert cells["services"] == "kb-assistant" and cells["state"] == "concluded"
    assert '"open_action":{"due_on":"2027-01-02","owner":"sam"}' in cells["conclusion"]
    assert not list(record.queryset(AuditFilters(service="dataagent-sql")))
    assert not list(record.queryset(AuditFilters(change_kind="model_upgrade")))
