"""The verbs behind a service's own playbooks and degradation policies: what they refuse
(with the sentence a person reads), what they write to the Runbook row, and the Event
each change appends with what it was before; clearing brings the tier's default back."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from ledger import services as ledger_services
from ledger.models import Event
from releases.governance import playbooks, services
from releases.models import Runbook

pytestmark = pytest.mark.django_db


@pytest.fixture
def service(world):
    ledger_services.update_service(world.service, actor=None, task_types=["chat", "sql"])
    return world.service


def messages(error: pytest.ExceptionInfo[ValidationError]) -> dict[str, list[str]]:
    return error.value.message_dict


def test_steps_must_come_as_a_list_or_text(service, owner):
    with pytest.raises(ValidationError) as refused:
        services.set_playbook(
            service, actor=owner, mode="node_restart", diagnosis={"a": 1}, recovery="y"
        )
    assert messages(refused) == {"diagnosis": ["Expected the steps in order, one a line."]}
    assert not Runbook.objects.exists()


def test_at_most_twenty_steps_a_playbook(service, owner):
    too_many = "\n".join(f"step {n}" for n in range(21))
    with pytest.raises(ValidationError) as refused:
        services.set_playbook(
            service, actor=owner, mode="node_restart", diagnosis="x", recovery=too_many
        )
    assert messages(refused) == {"recovery": ["At most 20 steps; got 21."]}
    assert not Event.objects.filter(action="service.playbook_changed").exists()


def test_a_step_longer_than_500_characters_is_refused_naming_it(service, owner):
    with pytest.raises(ValidationError) as refused:
        services.set_playbook(
            service,
            actor=owner,
            mode="node_restart",
            diagnosis=["Which node", "x" * 501],
            recovery="Drain it",
        )
    assert messages(refused) == {"diagnosis": ["Step 2 has 501 characters; at most 500."]}


def test_clearing_a_playbook_that_is_the_default_already_changes_nothing(service, owner):
    assert services.clear_playbook(service, actor=owner, mode="kv_cache_oom") is False
    assert not Event.objects.filter(action="service.playbook_changed").exists()


def test_a_service_sets_how_a_task_type_degrades_with_an_event_of_before_and_after(service, owner):
    runbook = services.set_degradation(
        service, actor=owner, task_type="sql", may_degrade=True, how="  read-only replica  "
    )
    assert Runbook.objects.get(pk=runbook.pk).degradation == {
        "sql": {"may_degrade": True, "how": "read-only replica"}
    }
    assert runbook.updated_by == owner
    event = Event.objects.get(action="service.degradation_changed")
    assert event.payload_data == {
        "task_type": "sql",
        "before": None,
        "after": {"may_degrade": True, "how": "read-only replica"},
    }
    assert event.service_id == service.pk
    assert playbooks.degradation_for("sql", runbook.degradation) == playbooks.Degradation(
        True, "read-only replica", overridden=True
    )


def test_saving_the_same_degradation_again_appends_no_event(service, owner):
    for _ in range(2):
        services.set_degradation(
            service, actor=owner, task_type="chat", may_degrade=True, how="async queue"
        )
    services.set_degradation(
        service, actor=owner, task_type="chat", may_degrade=False, how="stops with an error"
    )
    changes = Event.objects.filter(action="service.degradation_changed").order_by("sequence")
    assert [e.payload_data["before"] for e in changes] == [
        None,
        {"may_degrade": True, "how": "async queue"},
    ]


def test_clearing_a_degradation_brings_the_default_back_and_records_what_it_was(service, owner):
    services.set_degradation(service, actor=owner, task_type="sql", may_degrade=True, how="replica")
    assert services.clear_degradation(service, actor=owner, task_type="sql") is True
    assert Runbook.objects.get(service=service).degradation == {}
    event = Event.objects.filter(action="service.degradation_changed").latest("sequence")
    assert event.payload_data == {
        "task_type": "sql",
        "before": {"may_degrade": True, "how": "replica"},
        "after": None,
    }
    # Already the default: nothing to clear, nothing recorded.
    assert services.clear_degradation(service, actor=owner, task_type="sql") is False
    assert Event.objects.filter(action="service.degradation_changed").count() == 2


def test_a_degradation_needs_a_known_task_type_and_says_how(service, owner):
    with pytest.raises(ValidationError) as unknown:
        services.set_degradation(
            service, actor=owner, task_type="poetry", may_degrade=True, how="x"
        )
    assert messages(unknown) == {"task_type": ["No task type 'poetry'."]}
    with pytest.raises(ValidationError) as blank:
        services.set_degradation(service, actor=owner, task_type="sql", may_degrade=False, how=" ")
    assert messages(blank) == {
        "how": ["Say how it degrades, or how it stops (e.g. stops with an explainable error)."]
    }
    with pytest.raises(ValidationError) as long:
        services.set_degradation(
            service, actor=owner, task_type="sql", may_degrade=False, how="x" * 301
        )
    assert messages(long) == {"how": ["At most 300 characters; got 301."]}
    assert not Runbook.objects.exists()
    assert not Event.objects.filter(action="service.degradation_changed").exists()


def test_only_platform_and_the_team_change_degradation(service, outsider, auditor, sre):
    for person in (outsider, auditor):
        with pytest.raises(PermissionDenied, match="can change the playbooks of kb-assistant"):
            services.set_degradation(
                service, actor=person, task_type="sql", may_degrade=True, how="replica"
            )
        with pytest.raises(PermissionDenied):
            services.clear_degradation(service, actor=person, task_type="sql")
    services.set_degradation(service, actor=sre, task_type="sql", may_degrade=True, how="replica")
    assert Event.objects.get(action="service.degradation_changed").actor == sre
