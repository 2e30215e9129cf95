"""The admission gates of a release: each pass, fail, waived or pending, with its reason.

`assess(release)` reads everything the gates look at in a constant number of
queries (whatever the number of sample sets, reports or sign-offs), judges each
gate that `releases.policy` applies to the release's tier and change kind, and
builds the snapshot sign-offs are bound to (`releases.snapshot`). Each result
says why in plain words and points at what it looked at (a report, a run, a
window), so a reviewer can follow it.

The queries: the release with its revisions, asset, license, runtime and
template (1); license acceptances when the license is gated (0-1); the
candidate's load-test reports (1); the latest finished replay of each required
set (1); the rollback target's last verification (0-1); blackout windows (1);
waivers (1); sign-offs with their signers (1).

The gates themselves: `product.py` (what the candidate is and how it
measured), `plan.py` (rollback, gray plan, logging, risk, path, calendar,
sign-offs); `base.py` holds the shapes and the citing helpers.
"""

from __future__ import annotations

import datetime as dt

from django.db.models import Q
from django.utils import timezone

from ledger.models import LoadTestReport
from releases import policy
from releases.gates import plan, product
from releases.gates.base import (
    Assessment,
    EvidenceRef,
    GateResult,
    Inputs,
    SignOffState,
    Status,
    WaiverRef,
)
from releases.gates.plan import blackout_at, emergency_overdue
from releases.gates.product import failed_samples
from releases.models import BlackoutWindow, Release, SignOff, Waiver
from replay import queries as replay_queries

# ---------------------------------------------------------------- loading


def load_inputs(release: Release, *, now: dt.datetime | None = None) -> Inputs:
    now = now or timezone.now()
    release = Release.objects.for_gates().get(pk=release.pk)
    service = release.service
    candidate = release.to_revision
    candidate.service = service
    reports = list(
        LoadTestReport.objects.filter(revision=candidate)
        .select_related("revision__runtime")
        .defer("results", "goodput_levels", "warnings")
    )
    for report in reports:
        report.revision = candidate
    runs = replay_queries.latest_verdicts(release.required_sample_sets, candidate)
    target = release.rollback_target or release.from_revision
    verification = replay_queries.last_verification(target) if target else None
    windows = list(
        BlackoutWindow.objects.filter(Q(service=service) | Q(service__isnull=True)).order_by(
            "starts_at", "pk"
        )
    )
    waivers = list(
        Waiver.objects.filter(release=release, revoked_at__isnull=True)
        .select_related("granted_by")
        .order_by("gate", "-granted_at")
    )
    signoffs = list(
        SignOff.objects.filter(release=release).select_related("signer").order_by("signed_at", "pk")
    )
    return Inputs(
        release=release,
        now=now,
        tier=service.tier,
        reports=reports,
        runs=runs,
        verification=verification,
        windows=windows,
        waivers=waivers,
        signoffs=signoffs,
    )


def assess(release: Release, *, now: dt.datetime | None = None) -> Assessment:
    """Every gate that applies, the snapshot, and where each sign-off stands."""
    from releases import snapshot as snapshots

    inputs = load_inputs(release, now=now)
    release = inputs.release
    keys = policy.gates_for(inputs.tier, release.change_kind)
    gates = [_judge(key, inputs) for key in keys if key != "signoffs"]
    snap = snapshots.build(inputs, gates)
    digest = snapshots.digest(snap)
    states = [
        SignOffState(
            s,
            standing=s.voided_at is None and s.snapshot_hash == digest,
            void_reason=s.void_reason
            or ("" if s.snapshot_hash == digest else snapshots.what_changed(s.snapshot, snap)),
        )
        for s in inputs.signoffs
    ]
    required = policy.required_signoffs(inputs.tier, release.path)
    overdue = emergency_overdue(release, states, required, inputs.now)
    if "signoffs" in keys:
        gates.append(plan.signoffs_gate(inputs, states, required, overdue))
    return Assessment(
        release=release,
        gates=gates,
        snapshot=snap,
        snapshot_hash=digest,
        signoffs=states,
        required_roles=required,
        waivers=inputs.waivers,
        overdue=overdue,
    )


def active_waiver(waivers: list[Waiver], key: str, now: dt.datetime) -> Waiver | None:
    return next((w for w in waivers if w.gate == key and w.expires_at > now), None)


def _judge(key: str, inputs: Inputs) -> GateResult:
    status, reason, evidence = _JUDGES[key](inputs)
    result = GateResult(
        key=key,
        title=policy.GATES[key],
        status=status,
        reason=reason,
        evidence=evidence,
        waiver=None,
    )
    waiver = active_waiver(inputs.waivers, key, inputs.now)
    if waiver is not None and key not in policy.NOT_WAIVABLE:
        result["waiver"] = WaiverRef(
            id=waiver.pk,
            granted_by=waiver.granted_by.get_username(),
            reason=waiver.reason,
            expires_at=waiver.expires_at,
        )
        if status != "pass":
            result["status"] = "waived"
            result["reason"] = (
                f"waived by {waiver.granted_by.get_username()} until "
                f"{waiver.expires_at:%Y-%m-%d %H:%M %Z}: {waiver.reason} (the gate says: {reason})"
            )
    return result


_JUDGES = {
    "license": product.license,
    "provenance": product.provenance,
    "image_pinned": product.image_pinned,
    "load_evidence": product.load_evidence,
    "metrics_coverage": product.metrics_coverage,
    "replay": product.replay,
    "failures_classified": product.failures_classified,
    "rollback_plan": plan.rollback_plan,
    "gray_plan": plan.gray_plan,
    "logging_policy": plan.logging_policy,
    "risk": plan.risk,
    "change_path": plan.change_path,
    "decommission_plan": plan.decommission_plan,
    "blackout": plan.blackout,
}


__all__ = [
    "Assessment",
    "EvidenceRef",
    "GateResult",
    "Inputs",
    "SignOffState",
    "Status",
    "WaiverRef",
    "active_waiver",
    "assess",
    "blackout_at",
    "emergency_overdue",
    "failed_samples",
    "load_inputs",
]
