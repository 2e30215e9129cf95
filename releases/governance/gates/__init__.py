"""The admission gates of a release: each pass, fail, waived or pending, with its reason.

`assess(release)` reads everything the gates look at in a constant number of
queries (whatever the number of sample sets, reports or sign-offs), judges each
gate that `releases.policy` applies to the release's tier and change kind, and
builds the snapshot sign-offs are bound to (`releases.governance.snapshot`). Each result
says why in plain words and points at what it looked at (a report, a run, a
window), so a reviewer can follow it. `assess_many(releases)` does the same for
a list of releases in the same number of queries as for one; `assess` is
`assess_many` of one release.

The queries: the releases with their service, template and filer (1), and
their revisions with asset, license and runtime (1) — `read_releases`; license acceptances when a license is gated (0-1); the
candidates' load-test reports (1); the latest finished replay of each required
set on each candidate (0-1: none when no set is named); the rollback targets'
last verifications and the revisions rolled back off their services (0-2: none
without a target); the task types of the services whose gateway policy must cover
them (0-1); the price sheets in force for the candidates' GPU models (0-1: none when
no release takes the cost_record gate); the capabilities of the from- and to-revisions
whose diff suggests the downstream systems (0-1: none unless a release takes the
impact_assessed gate); the sample tags of the required sets (0-1: none unless such a
release names impacted task types and sample sets); the drills of the candidates (0-1: none unless a
capacity change states a planned peak); blackout windows (1); waivers (1); sign-offs with their signers (1).

The gates themselves: `product.py` (what the candidate is and how it
measured), `plan.py` (rollback, gray plan, logging, risk, path, calendar,
sign-offs), `gateway.py` (the candidate's gateway policy), `cost.py` (a price for its hardware), `downstream.py` (the impact the diff suggests, assessed),
`drill.py` (a capacity change drilled at its planned peak); `base.py` holds the shapes and the citing helpers.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from django.db.models import Q
from django.utils import timezone

from ledger import queries as ledger_queries
from ledger.models import Capability, LoadTestReport, PriceSheet, Revision, Service
from releases import policy
from releases.governance import impact
from releases.governance import snapshot as snapshots
from releases.governance.gates import cost, downstream, drill, gateway, plan, product
from releases.governance.gates.base import (
    Assessment,
    EvidenceRef,
    GateResult,
    Inputs,
    SignOffState,
    Status,
    WaiverRef,
    waiver_refusal,
)
from releases.governance.gates.plan import blackout_at, emergency_overdue
from releases.governance.gates.product import failed_samples
from releases.governance.queries.rolled_back import rolled_back_by_service
from releases.models import BlackoutWindow, Drill, Release, SignOff, Waiver
from replay import queries as replay_queries

# ---------------------------------------------------------------- loading


def load_inputs(release: Release, *, now: dt.datetime | None = None) -> Inputs:
    return load_inputs_many([release], now=now)[0]


def read_releases(pks: Iterable[int]) -> dict[int, Release]:
    """Releases by id with every part the gates read, in two statements: the releases
    with their service, team, standard template and filer; then their from-, to- and
    rollback revisions at once, each with its service, asset, license, parent asset and
    runtime.

    Not one statement joining all sixteen tables: that took PostgreSQL about 5 ms to
    plan and under 1 ms to run, at every page view; two statements of five and seven
    tables plan in a fraction of that, and Django builds them faster.
    """
    releases = (
        Release.objects.select_related("service__team", "standard_template", "filed_by")
        .order_by()
        .in_bulk(list(pks))
    )
    ids = {
        pk
        for release in releases.values()
        for pk in (release.from_revision_id, release.to_revision_id, release.rollback_target_id)
        if pk is not None
    }
    revisions = (
        Revision.objects.select_related(
            "service",
            "model_asset__license",
            "model_asset__derived_from",
            "runtime",
            "gateway_policy",
        )
        .order_by()
        .in_bulk(ids)
        if ids
        else {}
    )
    for release in releases.values():
        release.from_revision = revisions.get(release.from_revision_id or 0)
        release.to_revision = revisions[release.to_revision_id]
        release.rollback_target = revisions.get(release.rollback_target_id or 0)
    return releases


def load_inputs_many(
    releases: Sequence[Release], *, now: dt.datetime | None = None, reload: bool = True
) -> list[Inputs]:
    """What the gates of each release read, in the order given (see the module's queries).

    `reload=False` takes the releases as given, saving the first two queries: for a
    page that has just read its release with `read_releases`.
    """
    now = now or timezone.now()
    pks = [release.pk for release in releases]
    if not pks:
        return []
    if reload:
        loaded = read_releases(pks)
        missing = [pk for pk in pks if pk not in loaded]
        if missing:
            raise Release.DoesNotExist(f"No release #{missing[0]}.")
        fresh = [loaded[pk] for pk in pks]
    else:
        fresh = list(releases)
    for release in fresh:
        release.to_revision.service = release.service

    reports: dict[int, list[LoadTestReport]] = defaultdict(list)
    for report in LoadTestReport.objects.filter(
        revision__in={release.to_revision_id for release in fresh}
    ).defer("results", "goodput_levels", "warnings"):
        reports[report.revision_id].append(report)
    runs = replay_queries.latest_verdicts_of_pairs(
        (name, release.to_revision_id) for release in fresh for name in release.required_sample_sets
    )
    targets = [release.rollback_target or release.from_revision for release in fresh]
    verifications = replay_queries.last_verifications(t.pk for t in targets if t is not None)
    rolled_back = rolled_back_by_service(
        release.service_id for release, target in zip(fresh, targets, strict=True) if target
    )
    accepted = ledger_queries.accepted_asset_ids(
        release.to_revision.model_asset for release in fresh
    )
    served = _served_task_types(fresh)
    capabilities = _capabilities(fresh)
    declared = {
        revision_id: {c.kind: c.value for c in rows} for revision_id, rows in capabilities.items()
    }
    impact_suggested = _impact_suggested(fresh, declared)
    set_tags = _set_tags(fresh)
    prices = _prices_in_force(fresh, now)
    drills = _drills_of_candidates(fresh)
    windows = list(
        BlackoutWindow.objects.filter(
            Q(service__in={release.service_id for release in fresh}) | Q(service__isnull=True)
        ).order_by("starts_at", "pk")
    )
    waivers: dict[int, list[Waiver]] = defaultdict(list)
    for waiver in (
        Waiver.objects.filter(release__in=pks, revoked_at__isnull=True)
        .select_related("granted_by")
        .order_by("gate", "-granted_at")
    ):
        waivers[waiver.release_id].append(waiver)
    signoffs: dict[int, list[SignOff]] = defaultdict(list)
    for signoff in (
        SignOff.objects.filter(release__in=pks).select_related("signer").order_by("signed_at", "pk")
    ):
        signoffs[signoff.release_id].append(signoff)

    found = []
    for release, target in zip(fresh, targets, strict=True):
        candidate = release.to_revision
        for report in reports[candidate.pk]:
            report.revision = candidate
        found.append(
            Inputs(
                release=release,
                now=now,
                tier=release.service.tier,
                reports=list(reports[candidate.pk]),
                runs={
                    name: run
                    for name in release.required_sample_sets
                    if (run := runs.get((name, candidate.pk))) is not None
                },
                verification=verifications.get(target.pk) if target is not None else None,
                license_accepted=candidate.model_asset_id in accepted,
                windows=[w for w in windows if w.service_id in (None, release.service_id)],
                waivers=waivers[release.pk],
                signoffs=signoffs[release.pk],
                served_task_types=served.get(release.service_id, ()),
                target_rolled_back=(
                    rolled_back[release.service_id].get(target.pk) if target is not None else None
                ),
                price_sheet=prices.get(candidate.runtime.gpu_model),
                drills=drills.get(candidate.pk, []),
                impact_suggested=impact_suggested.get(release.pk, {}),
                declared_capabilities=_pair(declared, release),
                metrics_capability=next(
                    (
                        c
                        for c in capabilities.get(candidate.pk, [])
                        if c.kind == Capability.Kind.METRICS
                    ),
                    None,
                ),
                set_tags={
                    name: set_tags[name]
                    for name in release.required_sample_sets
                    if name in set_tags
                },
            )
        )
    return found


def _served_task_types(releases: Sequence[Release]) -> dict[int, tuple[str, ...]]:
    """The task types of each service whose tier's gateway policy must cover them, or
    whose tier asks for load-test evidence by task type."""
    services = {
        release.service_id
        for release in releases
        if "degradation" in policy.GATEWAY_POLICY_NEEDS[release.service.tier]
        or release.service.tier in policy.TASK_TYPE_EVIDENCE_TIERS
    }
    if not services:
        return {}
    served: dict[int, list[str]] = defaultdict(list)
    rows = Service.task_types.through.objects.filter(service__in=services).values_list(
        "service_id", "tasktype__slug"
    )
    for service_id, slug in rows.order_by("tasktype__slug"):
        served[service_id].append(slug)
    return {service_id: tuple(slugs) for service_id, slugs in served.items()}


def _pair(declared: dict[int, dict[str, Any]], release: Release) -> dict[int, dict[str, Any]]:
    """The capabilities of the release's from- and to-revision, when they were read."""
    ids = [release.to_revision_id, release.from_revision_id]
    if not all(pk is None or pk in declared for pk in ids):
        return {}
    return {pk: declared[pk] for pk in ids if pk is not None}


def _takes_impact_gate(release: Release) -> bool:
    return "impact_assessed" in policy.gates_for(release.service.tier, release.change_kind)


def _capabilities(releases: Sequence[Release]) -> dict[int, list[Capability]]:
    """The capabilities of the from- and to-revisions of the releases whose gates read
    them (the diff of impact_assessed, the verified metrics of metrics_coverage), by
    revision id, in one query."""
    ids: set[int] = set()
    for release in releases:
        keys = policy.gates_for(release.service.tier, release.change_kind)
        if "impact_assessed" in keys or "metrics_coverage" in keys:
            ids.add(release.to_revision_id)
            if release.from_revision_id:
                ids.add(release.from_revision_id)
    found: dict[int, list[Capability]] = {pk: [] for pk in ids}
    if ids:
        for capability in Capability.objects.filter(revision_id__in=ids).order_by("kind"):
            found[capability.revision_id].append(capability)
    return found


def _impact_suggested(
    releases: Sequence[Release], declared: dict[int, dict[str, Any]]
) -> dict[int, dict[str, list[str]]]:
    """The downstream systems the diff of each release's from- and to-revision suggests,
    for those taking the impact_assessed gate."""
    return {
        release.pk: impact.suggested_systems(
            ledger_queries.revision_diff(
                release.from_revision,
                release.to_revision,
                capabilities=declared,
            )
        )
        for release in releases
        if _takes_impact_gate(release)
    }


def _set_tags(releases: Sequence[Release]) -> dict[str, set[str]]:
    """The sample tags of the newest version of each sample set a release taking the
    impact_assessed gate requires, when it names impacted task types (one query)."""
    names = {
        name
        for release in releases
        if release.impact_task_types and _takes_impact_gate(release)
        for name in release.required_sample_sets
    }
    if not names:
        return {}
    return replay_queries.newest_sample_tags(names)


def _prices_in_force(releases: Sequence[Release], now: dt.datetime) -> dict[str, PriceSheet]:
    """The price sheet in force today for the GPU model of each candidate whose release
    takes the cost_record gate."""
    models = {
        release.to_revision.runtime.gpu_model
        for release in releases
        if "cost_record" in policy.gates_for(release.service.tier, release.change_kind)
    }
    return ledger_queries.prices_in_force(models, cost.assessment_day(now))


def _drills_of_candidates(releases: Sequence[Release]) -> dict[int, list[Drill]]:
    """The drills run against each candidate whose release states a planned peak, newest
    first (the peak_drill gate)."""
    candidates = {
        release.to_revision_id
        for release in releases
        if release.planned_peak_rps is not None
        and "peak_drill" in policy.gates_for(release.service.tier, release.change_kind)
    }
    if not candidates:
        return {}
    found: dict[int, list[Drill]] = defaultdict(list)
    for ran in (
        Drill.objects.filter(
            revision__in=candidates, state__in=[Drill.State.RAN, Drill.State.CONCLUDED]
        )
        .only("pk", "name", "revision_id", "results", "ran_at")
        .order_by("-ran_at", "-pk")
    ):
        if ran.revision_id is not None:
            found[ran.revision_id].append(ran)
    return found


def assess(release: Release, *, now: dt.datetime | None = None, reload: bool = True) -> Assessment:
    """Every gate that applies, the snapshot, and where each sign-off stands.

    `reload=False`: `release` was just read with `read_releases`."""
    return assess_many([release], now=now, reload=reload)[0]


def assess_many(
    releases: Sequence[Release], *, now: dt.datetime | None = None, reload: bool = True
) -> list[Assessment]:
    """`assess` of each release, in the order given, in as many queries as for one."""
    return [_assess(inputs) for inputs in load_inputs_many(releases, now=now, reload=reload)]


def _assess(inputs: Inputs) -> Assessment:
    release = inputs.release
    keys = policy.gates_for(inputs.tier, release.change_kind)
    gates = [_judge(key, inputs) for key in keys if key != "signoffs"]
    snap = snapshots.build(inputs, gates)
    digest = snapshots.digest(snap)
    if release.state in Release.OPEN_STATES:
        states = [
            SignOffState(
                s,
                standing=s.voided_at is None and s.snapshot_hash == digest,
                void_reason=s.void_reason
                or ("" if s.snapshot_hash == digest else snapshots.what_changed(s.snapshot, snap)),
            )
            for s in inputs.signoffs
        ]
    else:
        # Closed: the sign-offs stand as they stood when it went out; what its evidence
        # became later (a target's verification failing) is no approval withdrawn.
        states = [
            SignOffState(s, standing=s.voided_at is None, void_reason=s.void_reason)
            for s in inputs.signoffs
        ]
    required = policy.required_signoffs(
        inputs.tier,
        release.path,
        risk_accepted=policy.accepts_risk(release.failure_classifications),
    )
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
        inputs=inputs,
    )


def rejudge(assessment: Assessment, *, signoffs: list[SignOff] | None = None) -> Assessment:
    """The assessment judged again from what it read, without a query: after the verb
    holding the release's lock changed the sign-offs (`signoffs`: the list now; else
    the same rows, voided in place)."""
    assert assessment.inputs is not None
    inputs = dataclasses.replace(
        assessment.inputs,
        signoffs=list(assessment.inputs.signoffs if signoffs is None else signoffs),
        evidence_used={},
    )
    return _assess(inputs)


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
    "retirement_plan": plan.retirement_plan,
    "blackout": plan.blackout,
    "gateway_policy": gateway.gateway_policy,
    "cost_record": cost.cost_record,
    "peak_drill": drill.peak_drill,
    "impact_assessed": downstream.impact_assessed,
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
    "assess_many",
    "blackout_at",
    "emergency_overdue",
    "failed_samples",
    "load_inputs",
    "load_inputs_many",
    "read_releases",
    "rejudge",
    "waiver_refusal",
]
