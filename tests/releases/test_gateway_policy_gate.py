"""The gateway_policy gate: what each tier needs of the candidate's gateway policy
(releases/policy.py: GATEWAY_POLICY_NEEDS), advisory on experimental services."""

from __future__ import annotations

import datetime as dt

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from ledger.models import TaskType
from ledger.services.gateway_policies import create_gateway_policy
from releases.governance import gates, services
from releases.governance.snapshot import what_changed
from tests.ledger.factories import RevisionFactory
from tests.releases.factories import build_world, complete_policy, file_release

pytestmark = pytest.mark.django_db


def _candidate_with(world, document):
    """A candidate of the world's service running a new policy version `document`."""
    version = create_gateway_policy(world.service, actor=None, document=document)
    return RevisionFactory(
        service=world.service,
        runtime=world.candidate.runtime,
        model_asset=world.candidate.model_asset,
        gateway_policy_version=version.label,
    )


def _gate(world, owner, document=None, *, candidate=None):
    candidate = candidate or _candidate_with(world, document)
    release = file_release(world, owner)
    services.update_release(release, actor=owner, to_revision=candidate)
    return gates.assess(release).gate("gateway_policy")


def _serve(world, *slugs):
    for slug in slugs:
        task_type, _ = TaskType.objects.get_or_create(slug=slug, defaults={"name": slug})
        world.service.task_types.add(task_type)


def test_a_complete_policy_passes_and_cites_its_version(world, owner):
    gate = gates.assess(file_release(world, owner)).gate("gateway_policy")

    assert gate["status"] == "pass"
    assert gate["reason"].startswith("v1: 2 tenant(s) with quotas; input ≤ 8192 tokens")
    assert "no external fallback" in gate["reason"]
    (ref,) = gate["evidence"]
    assert ref["kind"] == "gateway_policy"
    assert ref["label"] == "kb-assistant gateway policy v1"
    assert ref["url"] == "/services/kb-assistant/gateway-policy/1/"


def test_a_policy_known_by_name_only_fails_in_production(world, owner):
    candidate = RevisionFactory(
        service=world.service, runtime=world.candidate.runtime, gateway_policy_version="gw-2026.03"
    )

    gate = _gate(world, owner, candidate=candidate)

    assert gate["status"] == "fail"
    assert "names gateway policy gw-2026.03, whose document was never recorded" in gate["reason"]


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"limits": {"max_input_tokens": 8192}}, "limits lack max_output_tokens, timeout_s"),
        ({"tenants": [{"name": "support", "rpm": 600, "tpm": 200000}]}, "tenant(s) sales of"),
        (
            {
                "tenants": [
                    {"name": "support", "rpm": 600},
                    {"name": "sales", "rpm": 600, "tpm": 1000},
                ]
            },
            "tenant(s) support lack rpm or tpm",
        ),
        ({"egress": None}, "egress is not stated"),
    ],
)
def test_production_refuses_what_is_missing_naming_it(world, owner, change, said):
    document = complete_policy(world.service, **change)
    if change.get("egress", "") is None:
        del document["egress"]

    gate = _gate(world, owner, document)

    assert gate["status"] == "fail"
    assert said in gate["reason"]


def test_production_needs_a_degradation_entry_for_every_task_type_served(world, owner):
    _serve(world, "chat", "sql")
    document = complete_policy(world.service)
    del document["degradation"]["sql"]

    gate = _gate(world, owner, document)

    assert gate["status"] == "fail"
    assert "no degradation for task type(s) sql" in gate["reason"]


def test_a_task_type_that_must_never_degrade_silently_may_only_stop_or_go_to_review(
    world, owner, team
):
    build_world(team, slug="support-faq", tier="internal")
    _serve(world, "chat", "sql")
    fallback = {"action": "fallback", "to_service": "support-faq"}
    document = complete_policy(world.service, degradation={"chat": fallback, "sql": dict(fallback)})

    gate = _gate(world, owner, document)

    assert gate["status"] == "fail"
    assert (
        "sql must never degrade silently: it may only stop or go to human review, not fallback"
        in gate["reason"]
    )
    assert "chat must" not in gate["reason"]  # chat may fall back
    document["degradation"]["sql"] = {"action": "human_review"}
    assert _gate(world, owner, document)["status"] == "pass"


def test_internal_needs_limits_and_tenants_only(team, owner):
    world = build_world(team, tier="internal", slug="internal-bot")
    _serve(world, "sql")
    document = complete_policy(world.service)
    del document["egress"], document["degradation"]
    assert _gate(world, owner, document)["status"] == "pass"

    del document["limits"]["timeout_s"]
    gate = _gate(world, owner, document)
    assert gate["status"] == "fail"
    assert gate["reason"] == "limits lack timeout_s."


def test_experimental_is_advisory_and_holds_nothing_back(team, owner):
    world = build_world(team, tier="experimental", slug="lab")
    candidate = _candidate_with(world, {"limits": {"max_input_tokens": 4096}})
    release = services.create_release(
        actor=owner,
        service=world.service,
        to_revision=candidate,
        change_kind="model_upgrade",
        summary="try it",
    )

    assessment = gates.assess(release)

    gate = assessment.gate("gateway_policy")
    assert gate["status"] == "advisory"
    assert gate["reason"].startswith("advisory on the experimental tier: limits lack")
    assert "tenant(s) support, sales of the service have no quota" in gate["reason"]
    assert assessment.failing() == []


def test_an_advisory_gate_takes_no_waiver(team, owner, sre):
    world = build_world(team, tier="experimental", slug="lab")
    candidate = _candidate_with(world, {})
    release = services.create_release(
        actor=owner,
        service=world.service,
        to_revision=candidate,
        change_kind="model_upgrade",
        summary="try it",
    )

    with pytest.raises(ValidationError, match="advisory on this service's tier"):
        services.grant_waiver(
            release,
            actor=sre,
            gate="gateway_policy",
            reason="not needed",
            expires_at=timezone.now() + dt.timedelta(days=3),
        )


def test_platform_waives_a_failing_gateway_policy_gate(world, owner, sre):
    candidate = _candidate_with(world, {"limits": {"max_input_tokens": 4096}})
    release = file_release(world, owner)
    services.update_release(release, actor=owner, to_revision=candidate)

    services.grant_waiver(
        release,
        actor=sre,
        gate="gateway_policy",
        reason="quotas come with the next version this week",
        expires_at=timezone.now() + dt.timedelta(days=3),
    )

    gate = gates.assess(release).gate("gateway_policy")
    assert gate["status"] == "waived"
    assert "(the gate says: limits lack" in gate["reason"]


def test_a_decommission_has_no_gateway_policy_gate(world, owner):
    release = file_release(
        world,
        owner,
        change_kind="decommission",
        decommission_moves=[{"kind": "tenant", "name": "support", "moved_to": "kb-long"}],
    )

    assert gates.assess(release).gate("gateway_policy") is None


def test_the_snapshot_names_the_candidates_policy_version_and_what_changed_says_so(world, owner):
    release = file_release(world, owner)
    before = gates.assess(release).snapshot
    assert before["gateway_policy"] == {
        "version": "v1",
        "sha256": world.candidate.gateway_policy.sha256,
    }

    services.update_release(
        release, actor=owner, to_revision=_candidate_with(world, complete_policy(world.service))
    )
    after = gates.assess(release).snapshot

    assert after["gateway_policy"]["version"] == "v2"
    assert "the gateway policy is now v2, was v1" in what_changed(before, after)
