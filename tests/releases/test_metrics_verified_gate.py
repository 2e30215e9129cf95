"""metrics_coverage reads what a probe saw on the candidate's /metrics, not only what
the form declares (issue 34, §6.5)."""

from __future__ import annotations

import pytest

from ledger import services as ledger_services
from ledger.models import Capability
from releases.governance import gates
from tests.releases.factories import build_world, file_release, metrics_seen

pytestmark = pytest.mark.django_db


def gate(release):
    result = gates.assess(release).gate("metrics_coverage")
    assert result is not None
    return result["status"], result["reason"]


def test_the_world_passes_with_gpu_memory_taken_from_dcgm(release, world):
    assert gate(release) == (
        "pass",
        f"7 required metrics declared and seen on {world.candidate.label}'s /metrics (GPU "
        "memory from DCGM, beside the engine).",
    )


def test_no_metrics_capability_to_probe_fails(world, owner):
    Capability.objects.filter(revision=world.candidate, kind="metrics").delete()
    status, reason = gate(file_release(world, owner))
    assert status == "fail"
    assert reason.startswith(
        f"declared, but {world.candidate.label} declares no metrics capability"
    )


def test_a_failed_probe_fails_naming_what_it_missed(world, owner):
    capability = Capability.objects.get(revision=world.candidate, kind="metrics")
    ledger_services.record_capability_check(
        capability,
        actor=None,
        passed=False,
        evidence={"missing": ["vllm:num_requests_waiting"], "found": [], "covers": []},
    )
    assert gate(file_release(world, owner)) == (
        "fail",
        f"declared, but not seen on {world.candidate.label}'s /metrics: its last probe failed "
        f"(missing vllm:num_requests_waiting). Probe a backend of {world.candidate.label}.",
    )


def test_a_required_metric_the_scrape_does_not_back_fails(team, owner):
    world = build_world(team, slug="kb2")
    Capability.objects.filter(revision=world.candidate, kind="metrics").delete()
    metrics_seen(world.candidate, covers=["ttft", "tpot", "tokens_per_s", "error_rate"])
    assert gate(file_release(world, owner)) == (
        "fail",
        f"declared, but the probe of {world.candidate.label}'s /metrics found no series for "
        "queue length, kv-cache usage.",
    )


def test_an_internal_release_needs_its_three_seen(team, owner):
    world = build_world(team, tier="internal", slug="internal-svc")
    Capability.objects.filter(revision=world.candidate, kind="metrics").delete()
    metrics_seen(world.candidate, covers=["ttft", "error_rate"])
    assert gate(file_release(world, owner, metrics_declared=["ttft", "tpot", "error_rate"])) == (
        "fail",
        f"declared, but the probe of {world.candidate.label}'s /metrics found no series for "
        "time per output token.",
    )
