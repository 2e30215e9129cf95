"""Playbook and degradation defaults per tier, and a service's own in their place."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from ledger.models import Event
from releases.governance import playbooks, services
from releases.models import Runbook


def test_every_failure_mode_has_diagnosis_then_recovery_ending_in_rollback():
    for mode, playbook in playbooks.DEFAULT_PLAYBOOKS.items():
        assert playbook.mode == mode
        assert playbook.diagnosis and playbook.recovery
        assert "Roll back" in playbook.recovery[-1]


def test_a_tier_lists_its_first_modes_first_and_every_mode():
    production = [p.mode for p in playbooks.playbooks_for("production")]
    assert production[:3] == [
        "slow_first_token",
        "stream_interruption",
        "structured_output_failure",
    ]
    assert sorted(production) == sorted(playbooks.FAILURE_MODES)


def test_a_services_own_playbook_replaces_the_default_for_its_mode_only():
    own = {"kv_cache_oom": {"diagnosis": ["Check the long-context tenant"], "recovery": ["Cap it"]}}
    found = {p.mode: p for p in playbooks.playbooks_for("internal", own)}
    assert found["kv_cache_oom"].diagnosis == ("Check the long-context tenant",)
    assert found["kv_cache_oom"].overridden is True
    assert found["node_restart"] == playbooks.DEFAULT_PLAYBOOKS["node_restart"]


def test_high_risk_tasks_never_degrade_silently_by_default_and_a_service_may_say_otherwise():
    assert not playbooks.degradation_for("sql").may_degrade
    assert not playbooks.degradation_for("unknown-task").may_degrade
    own = {"sql": {"may_degrade": True, "how": "read-only replica answers"}}
    assert playbooks.degradation_for("sql", own) == playbooks.Degradation(
        True, "read-only replica answers", overridden=True
    )


@pytest.mark.django_db
def test_changing_a_playbook_is_an_event_with_what_it_was_and_refuses_nonsense(
    world, owner, outsider
):
    services.set_playbook(
        world.service,
        actor=owner,
        mode="node_restart",
        diagnosis="Which node\nWhy",
        recovery=["Drain it"],
    )
    runbook = Runbook.objects.get(service=world.service)
    assert runbook.playbooks["node_restart"] == {
        "diagnosis": ["Which node", "Why"],
        "recovery": ["Drain it"],
    }
    services.set_playbook(
        world.service,
        actor=owner,
        mode="node_restart",
        diagnosis="Which node\nWhy",
        recovery=["Drain it"],
    )
    assert (
        Event.objects.filter(action="service.playbook_changed").count() == 1
    )  # unchanged: no event
    with pytest.raises(ValidationError, match="'hiccup' is not a failure mode"):
        services.set_playbook(
            world.service, actor=owner, mode="hiccup", diagnosis="x", recovery="y"
        )
    with pytest.raises(ValidationError, match="Give at least one step"):
        services.set_playbook(
            world.service, actor=owner, mode="node_restart", diagnosis=" \n", recovery="y"
        )
    with pytest.raises(PermissionDenied):
        services.set_playbook(
            world.service, actor=outsider, mode="node_restart", diagnosis="x", recovery="y"
        )
    assert services.clear_playbook(world.service, actor=owner, mode="node_restart") is True
    event = Event.objects.filter(action="service.playbook_changed").latest("sequence")
    assert event.payload_data["after"] is None
    assert event.payload_data["before"]["recovery"] == ["Drain it"]
