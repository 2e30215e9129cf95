"""The cost_record gate: an internal or production release needs a price sheet for its
candidate's GPU model, in force on the day of the assessment (releases/policy.py)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from django.utils import timezone

from ledger import services as ledger_services
from releases import policy
from releases.governance import gates, services
from tests.ledger.factories import RevisionFactory, RuntimeFactory
from tests.releases.factories import build_world, file_release

pytestmark = pytest.mark.django_db


def _on(world, owner, **runtime):
    """A release of the world's service whose candidate runs on a runtime of `runtime`."""
    candidate = RevisionFactory(
        service=world.service,
        runtime=RuntimeFactory(team=world.service.team, **runtime),
        model_asset=world.candidate.model_asset,
        gateway_policy_version=world.candidate.gateway_policy.label,
    )
    release = file_release(world, owner)
    services.update_release(release, actor=owner, to_revision=candidate)
    return release


def test_a_price_in_force_passes_and_cites_the_version(release):
    gate = gates.assess(release).gate("cost_record")

    assert gate["status"] == "pass"
    assert gate["reason"] == "H100-80GB (1 per replica on " + (
        f"{release.to_revision.runtime.name}) has a price sheet in force."
    )
    (ref,) = gate["evidence"]
    assert ref["kind"] == "price_sheet"
    assert ref["label"].startswith("H100-80GB: 2.4500 USD per GPU-hour from ")
    assert ref["url"] == "/price-sheets/#gpu-H100-80GB"


def test_no_price_for_the_gpu_model_fails_naming_it(world, owner):
    release = _on(world, owner, gpu_model="L4-24GB")

    gate = gates.assess(release).gate("cost_record")

    assert gate["status"] == "fail"
    assert (
        gate["reason"] == "No price sheet for L4-24GB in force today: record one at /price-sheets/."
    )


def test_a_runtime_naming_no_gpu_model_fails_saying_so(world, owner):
    release = _on(world, owner, gpu_model="", name="cpu-only")

    gate = gates.assess(release).gate("cost_record")

    assert gate["status"] == "fail"
    assert gate["reason"].startswith("Runtime cpu-only names no GPU model")
    assert gate["evidence"][0]["url"] == "/runtimes/cpu-only/"


def test_a_price_announced_ahead_counts_from_its_day(world, owner):
    release = _on(world, owner, gpu_model="L40S-48GB")
    today = timezone.now().date()
    ledger_services.record_price_sheet(
        actor=None,
        gpu_model="L40S-48GB",
        price_per_gpu_hour=Decimal("1.1000"),
        currency="USD",
        effective_from=today + dt.timedelta(days=10),
    )

    assert gates.assess(release).gate("cost_record")["status"] == "fail"
    later = timezone.now() + dt.timedelta(days=10)
    assert gates.assess(release, now=later).gate("cost_record")["status"] == "pass"


def test_a_new_price_version_changes_no_reason(release):
    """The snapshot binds the reasons: a new price is no new fact about the release."""
    before = gates.assess(release).gate("cost_record")
    ledger_services.record_price_sheet(
        actor=None,
        gpu_model="H100-80GB",
        price_per_gpu_hour="2.9900",
        currency="USD",
        effective_from=timezone.now().date(),
    )

    after = gates.assess(release).gate("cost_record")

    assert after["reason"] == before["reason"]
    assert after["evidence"] != before["evidence"]


@pytest.mark.parametrize(
    ("tier", "applies"), [("experimental", False), ("internal", True), ("production", True)]
)
def test_the_gate_applies_to_internal_and_production_tiers(team, owner, tier, applies):
    world = build_world(team, tier=tier)

    keys = [g["key"] for g in gates.assess(file_release(world, owner)).gates]

    assert ("cost_record" in keys) is applies
    assert ("cost_record" in policy.gates_for(tier, "model_upgrade")) is applies


def test_a_decommission_needs_no_price(world, owner):
    release = services.create_release(
        actor=owner,
        service=world.service,
        to_revision=world.candidate,
        change_kind="decommission",
        summary="retire kb-assistant",
    )

    assert gates.assess(release).gate("cost_record") is None


def test_platform_waives_a_missing_price(world, owner, sre):
    release = _on(world, owner, gpu_model="L4-24GB")
    assert policy.waiver_owner("cost_record") == "platform"

    services.grant_waiver(
        release,
        actor=sre,
        gate="cost_record",
        reason="the L4 contract is signed on Monday",
        expires_at=timezone.now() + dt.timedelta(days=3),
    )

    gate = gates.assess(release).gate("cost_record")
    assert gate["status"] == "waived"
    assert "No price sheet for L4-24GB" in gate["reason"]
    # The snapshot binds the reason: tomorrow it reads the same, voiding no sign-off.
    tomorrow = gates.assess(release, now=timezone.now() + dt.timedelta(days=1))
    assert tomorrow.gate("cost_record")["reason"] == gate["reason"]
