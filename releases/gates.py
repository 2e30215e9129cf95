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
"""

from __future__ import annotations

import datetime as dt
import itertools
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from django.conf import settings
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from ledger import queries as ledger_queries
from ledger.models import LoadTestReport, Revision
from releases import policy
from releases.models import BlackoutWindow, Release, SignOff, Waiver
from releases.schemas import CLASSIFICATIONS, GUARDS, METRICS
from replay import queries as replay_queries
from replay.models import Run

Status = Literal["pass", "fail", "waived", "pending"]


class EvidenceRef(TypedDict):
    kind: str
    id: int | str | None
    label: str
    url: str


class WaiverRef(TypedDict):
    id: int
    granted_by: str
    reason: str
    expires_at: dt.datetime


class GateResult(TypedDict):
    key: str
    title: str
    status: Status
    reason: str
    evidence: list[EvidenceRef]
    waiver: WaiverRef | None


@dataclass
class Inputs:
    """What the gates read, loaded once."""

    release: Release
    now: dt.datetime
    tier: str
    reports: list[LoadTestReport]
    runs: dict[str, Run]
    verification: Run | None
    windows: list[BlackoutWindow]
    waivers: list[Waiver]
    signoffs: list[SignOff]
    # Filled while judging: what the snapshot binds to.
    evidence_used: dict[str, LoadTestReport] = field(default_factory=dict)

    @property
    def rollback_target(self) -> Revision | None:
        return self.release.rollback_target or self.release.from_revision


@dataclass
class Assessment:
    release: Release
    gates: list[GateResult]
    snapshot: dict[str, Any]
    snapshot_hash: str
    signoffs: list[SignOffState]
    required_roles: tuple[str, ...]
    waivers: list[Waiver]
    overdue: bool

    def failing(self, *, but: frozenset[str] = frozenset()) -> list[GateResult]:
        """Gates neither passed nor waived (`but` those keys)."""
        return [g for g in self.gates if g["status"] in ("fail", "pending") and g["key"] not in but]

    def gate(self, key: str) -> GateResult | None:
        return next((g for g in self.gates if g["key"] == key), None)


@dataclass
class SignOffState:
    signoff: SignOff
    # Standing: not voided, and bound to the snapshot as it is now.
    standing: bool
    void_reason: str


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
        gates.append(_signoffs_gate(inputs, states, required, overdue))
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


Verdict = tuple[Status, str, list[EvidenceRef]]


def _ref(kind: str, id_: int | str | None, label: str, url: str = "") -> EvidenceRef:
    return EvidenceRef(kind=kind, id=id_, label=label, url=url)


def _revision_ref(revision: Revision) -> EvidenceRef:
    url = reverse(
        "ledger:revision_detail",
        kwargs={"slug": revision.service.slug, "number": revision.number},
    )
    return _ref("revision", revision.pk, f"{revision.service.slug} {revision.label}", url)


def _report_ref(report: LoadTestReport) -> EvidenceRef:
    url = reverse(
        "ledger:loadtest_detail",
        kwargs={
            "slug": report.revision.service.slug,
            "number": report.revision.number,
            "pk": report.pk,
        },
    )
    return _ref("loadtest_report", report.pk, f"report #{report.pk}", url)


def _run_ref(run: Run) -> EvidenceRef:
    return _ref(
        "replay_run",
        run.pk,
        f"run #{run.pk} ({run.sample_set})",
        reverse("replay:run_detail", kwargs={"pk": run.pk}),
    )


def _listing(items: list[str], limit: int = 5) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


# ---------------------------------------------------------------- the gates


def _license(inputs: Inputs) -> Verdict:
    release = inputs.release
    revision = release.to_revision
    asset = revision.model_asset
    findings = ledger_queries.license_findings(release.service, revision)
    breaches = [f for f in findings if f.severity == "breach"]
    ref = _ref(
        "model_asset",
        asset.pk,
        f"{asset} ({asset.license.spdx_id})",
        reverse("ledger:asset_detail", kwargs={"pk": asset.pk}),
    )
    if breaches:
        return "fail", " ".join(f.message for f in breaches), [ref]
    return (
        "pass",
        f"{asset.license.spdx_id} is approved for {release.service.get_exposure_display().lower()}.",
        [ref],
    )


def _provenance(inputs: Inputs) -> Verdict:
    asset = inputs.release.to_revision.model_asset
    ref = _ref(
        "model_asset", asset.pk, str(asset), reverse("ledger:asset_detail", kwargs={"pk": asset.pk})
    )
    missing = [
        label
        for label, value in (
            ("weights digest", asset.weights_digest),
            ("tokenizer digest", asset.tokenizer_digest),
            ("config digest", asset.config_digest),
            ("source repository", asset.source_repository),
        )
        if not value
    ]
    problems = [f"{asset} has no {_listing(missing)}"] if missing else []
    parent = asset.derived_from
    if parent is not None:
        if parent.family != asset.family:
            problems.append(
                f"{asset} says family {asset.family} but was derived from {parent}, "
                f"family {parent.family}"
            )
        if asset.derivation == "quantized" and parent.tokenizer_digest != asset.tokenizer_digest:
            problems.append(
                f"{asset} is a quantization of {parent} but its tokenizer differs from the "
                "parent's: a quantization keeps the tokenizer of its family"
            )
    if problems:
        return "fail", "; ".join(problems) + ".", [ref]
    lineage = f", derived from {parent}" if parent else ""
    return "pass", f"weights, tokenizer and config digests recorded{lineage}.", [ref]


def _image_pinned(inputs: Inputs) -> Verdict:
    runtime = inputs.release.to_revision.runtime
    ref = _ref(
        "runtime",
        runtime.pk,
        runtime.name,
        reverse("ledger:runtime_detail", kwargs={"name": runtime.name}),
    )
    problems = []
    if not runtime.image_digest:
        problems.append(f"image {runtime.image} is not pinned by digest (@sha256:…)")
    if not runtime.launch_parameters:
        problems.append(f"runtime {runtime.name} records no launch parameters")
    if problems:
        return "fail", "; ".join(problems) + ".", [ref]
    return (
        "pass",
        f"image pinned at {(runtime.image_digest or '')[:19]}…, "
        f"{len(runtime.launch_parameters)} launch parameters recorded.",
        [ref],
    )


_SLO_CHECKS = (
    # (label, report column, service SLO field, scale of the column to the SLO's unit, unit)
    ("p95 TTFT", "ttft_p95_ms", "slo_ttft_p95_ms", 1.0, "ms"),
    ("p99 TTFT", "ttft_p99_ms", "slo_ttft_p99_ms", 1.0, "ms"),
    ("p95 TPOT", "tpot_p95_ms", "slo_tpot_ms", 1.0, "ms"),
    ("error rate", "error_rate", "slo_error_rate_pct", 100.0, "%"),
)


def _load_evidence(inputs: Inputs) -> Verdict:
    release = inputs.release
    service = release.service
    statuses = [(r, ledger_queries.evidence_status(r, now=inputs.now)) for r in inputs.reports]
    current = [r for r, s in statuses if s.status == "current"]
    newest = ledger_queries.newest_by_workload(current)
    inputs.evidence_used = newest
    stale_reason = {}
    for report, status in sorted(statuses, key=lambda p: (p[0].measured_at, p[0].pk)):
        if status.status == "stale":
            stale_reason[report.workload] = (report, status.reason)
    required = policy.REQUIRED_WORKLOADS[inputs.tier]
    slos = [c for c in _SLO_CHECKS if getattr(service, c[2]) is not None]
    problems: list[str] = []
    refs: list[EvidenceRef] = []
    if required and not slos:
        problems.append(f"{service.slug} has no SLO to judge the evidence against: set its SLOs")
    for workload in required:
        found = newest.get(workload)
        if found is None:
            stale = stale_reason.get(workload)
            if stale:
                problems.append(f"the only {workload} report (#{stale[0].pk}) is stale: {stale[1]}")
                refs.append(_report_ref(stale[0]))
            else:
                problems.append(f"no current load-test report for {workload}")
            continue
        report = found
        refs.append(_report_ref(report))
        for label, column, slo_field, scale, unit in slos:
            value = getattr(report, column)
            bound = float(getattr(service, slo_field))
            if value is None:
                problems.append(f"{label} under {workload} not measured — report #{report.pk}")
            elif value * scale > bound:
                problems.append(
                    f"{label} {value * scale:.4g} {unit} under {workload} exceeds the service "
                    f"SLO of {bound:g} {unit} — report #{report.pk}"
                )
    if problems:
        return "fail", "; ".join(problems) + ".", refs
    if not required:
        return "pass", f"{inputs.tier} services need no load-test evidence.", refs
    return (
        "pass",
        f"current reports for {', '.join(required)} are within the service SLOs.",
        refs,
    )


def _metrics_coverage(inputs: Inputs) -> Verdict:
    required = policy.REQUIRED_METRICS[inputs.tier]
    declared = set(inputs.release.metrics_declared)
    missing = [METRICS[m].lower() for m in required if m not in declared]
    if missing:
        return "fail", f"metrics not declared: {_listing(missing, 7)}.", []
    return "pass", f"{len(required)} required metrics declared.", []


def _replay(inputs: Inputs) -> Verdict:
    release = inputs.release
    candidate = release.to_revision
    live = release.from_revision
    names = list(release.required_sample_sets)
    needed = policy.MIN_SAMPLE_SETS[inputs.tier]
    problems: list[str] = []
    refs: list[EvidenceRef] = []
    if len(names) < needed:
        problems.append(
            f"{inputs.tier} releases must name at least {needed} replay sample set"
            f"{'s' if needed > 1 else ''}; none named"
        )
    for name in names:
        run = inputs.runs.get(name)
        if run is None:
            problems.append(f"no finished replay of {name} on {candidate.label}")
            continue
        refs.append(_run_ref(run))
        why = "; ".join((run.summary or {}).get("verdict_reasons") or [])
        if run.fingerprint != candidate.fingerprint:
            problems.append(
                f"run #{run.pk} of {name} replayed another fingerprint of {candidate.label}: "
                "replay it again"
            )
        elif run.verdict == Run.Verdict.REGRESSED:
            problems.append(
                f"{name} regressed on {candidate.label}: {why or 'see run'} — run #{run.pk}"
            )
        elif run.verdict == Run.Verdict.FAILED:
            problems.append(
                f"{name} failed on {candidate.label}: {why or 'see run'} — run #{run.pk}"
            )
        elif run.verdict == Run.Verdict.ERRORED:
            problems.append(f"run #{run.pk} of {name} reached no backend")
        elif run.verdict != Run.Verdict.PASSED:
            problems.append(f"run #{run.pk} of {name} has no verdict yet")
        elif live is not None and (run.baseline is None or run.baseline.revision_id != live.pk):
            problems.append(
                f"run #{run.pk} of {name} was not compared against the live revision "
                f"{live.label}: replay {name} on {live.label} first, then on {candidate.label}"
            )
    if problems:
        return "fail", "; ".join(problems) + ".", refs
    if not names:
        return "pass", f"{inputs.tier} releases need no replay.", refs
    against = f" without regression against {live.label}" if live else ""
    return "pass", f"{_listing(names)} passed on {candidate.label}{against}.", refs


def failed_samples(inputs: Inputs) -> list[tuple[str, str]]:
    """(set, sample key) of every sample below its pass-rate budget in the latest runs."""
    failed = []
    for name in inputs.release.required_sample_sets:
        run = inputs.runs.get(name)
        if run is None:
            continue
        for key in (run.summary or {}).get("samples_below_budget") or []:
            failed.append((name, key))
    return failed


def _failures_classified(inputs: Inputs) -> Verdict:
    failed = failed_samples(inputs)
    given = {
        (c.get("sample_set"), c.get("sample")): c
        for c in inputs.release.failure_classifications
        if isinstance(c, dict)
    }
    unclassified, blocking, vague = [], [], []
    counts: dict[str, int] = {}
    for name, key in failed:
        entry = given.get((name, key))
        label = f"{name}/{key}"
        if entry is None:
            unclassified.append(label)
            continue
        kind = str(entry.get("classification"))
        counts[kind] = counts.get(kind, 0) + 1
        if kind == "blocks":
            blocking.append(label)
        elif kind == "degradation" and not (entry.get("degradation") or "").strip():
            vague.append(label)
    refs = [_run_ref(inputs.runs[n]) for n in dict.fromkeys(n for n, _ in failed)]
    problems = []
    if unclassified:
        problems.append(
            f"{len(unclassified)} failed sample{'s' if len(unclassified) > 1 else ''} "
            f"not classified: {_listing(unclassified)}"
        )
    if blocking:
        problems.append(f"classified as blocking the release: {_listing(blocking)}")
    if vague:
        problems.append(f"handled by degradation, but which is not said: {_listing(vague)}")
    if problems:
        return "fail", "; ".join(problems) + ".", refs
    if not failed:
        return "pass", "no sample failed on the candidate.", refs
    summary = ", ".join(f"{n} {CLASSIFICATIONS[k].lower()}" for k, n in sorted(counts.items()))
    return "pass", f"{len(failed)} failed samples classified: {summary}.", refs


def _rollback_plan(inputs: Inputs) -> Verdict:
    release = inputs.release
    target = inputs.rollback_target
    missing = []
    if target is None:
        missing.append("a target revision (there is no live revision to default to)")
    if not release.rollback_kind:
        missing.append("the kind (engine, model or gateway policy)")
    if not release.rollback_triggers:
        missing.append("trigger conditions")
    if release.rollback_expected_minutes is None:
        missing.append("the expected minutes")
    if not release.rollback_impact_scope.strip():
        missing.append("the impact scope")
    if not release.rollback_verification_set:
        missing.append("a verification sample set")
    problems = [f"the rollback plan lacks {_listing(missing, 6)}"] if missing else []
    refs: list[EvidenceRef] = []
    if target is not None:
        refs.append(_revision_ref(target))
        if target.pk == release.to_revision_id:
            problems.append("the rollback target cannot be the candidate itself")
        elif target.service_id != release.service_id:
            problems.append(f"the rollback target {target} belongs to another service")
        else:
            problems.extend(_verification_problems(inputs, target, refs))
    if problems:
        return "fail", "; ".join(problems) + ".", refs
    run = inputs.verification
    assert target is not None and run is not None
    return (
        "pass",
        f"back to {target.label} ({release.get_rollback_kind_display().lower()}) in about "
        f"{release.rollback_expected_minutes} min; {target.label} verified "
        f"{run.finished_at:%Y-%m-%d} — run #{run.pk}.",
        refs,
    )


def _verification_problems(inputs: Inputs, target: Revision, refs: list[EvidenceRef]) -> list[str]:
    run = inputs.verification
    limit = policy.ROLLBACK_VERIFICATION_MAX_AGE_DAYS[inputs.tier]
    if run is None:
        return [f"{target.label} was never verified by a rollback-target replay"]
    refs.append(_run_ref(run))
    if run.verdict != Run.Verdict.PASSED:
        return [f"the last verification of {target.label} {run.verdict} — run #{run.pk}"]
    age = inputs.now - (run.finished_at or inputs.now)
    if age > dt.timedelta(days=limit):
        return [
            f"{target.label} was last verified {age.days} days ago — run #{run.pk}; "
            f"{inputs.tier} releases need a verification within {limit} days"
        ]
    return []


def _gray_plan(inputs: Inputs) -> Verdict:
    stages = [s for s in inputs.release.gray_stages if isinstance(s, dict)]
    tier = inputs.tier
    if not stages:
        return "fail", "the gray plan has no stages.", []
    problems = []
    shares = [float(s.get("traffic_pct", 0)) for s in stages]
    for number, (before, after) in enumerate(itertools.pairwise(shares), start=2):
        if after <= before:
            problems.append(
                f"stage {number} sends {after:g} % after stage {number - 1} sent {before:g} %: "
                "traffic must grow stage by stage"
            )
    if shares[-1] != 100:
        problems.append(f"the last stage sends {shares[-1]:g} %; the plan must end at 100 %")
    below = sum(1 for share in shares if share < 100)
    needed = policy.MIN_STAGES_BELOW_FULL[tier]
    if below < needed:
        problems.append(
            f"{tier} releases need at least {needed} stages below 100 % traffic; "
            f"the plan has {below}"
        )
    for number, stage in enumerate(stages, start=1):
        guards = stage.get("guards") or {}
        lacking = [GUARDS[g] for g in policy.REQUIRED_GUARDS[tier] if guards.get(g) is None]
        if lacking and stage.get("traffic_pct", 0) < 100:
            problems.append(f"stage {number} has no guard on {_listing(lacking)}")
    if problems:
        return "fail", "; ".join(problems) + ".", []
    plan = " → ".join(f"{share:g} %" for share in shares)
    return "pass", f"{len(stages)} stages: {plan}.", []


def _logging_policy(inputs: Inputs) -> Verdict:
    given = inputs.release.logging_policy or {}
    labels = {
        "debug_logs": "debug logs",
        "audit_logs": "audit logs",
        "sensitive_retention_days": "sensitive-content retention",
    }
    missing = [label for key, label in labels.items() if given.get(key) is None]
    if missing:
        return "fail", f"the logging policy does not say {_listing(missing)}.", []
    return (
        "pass",
        f"debug logs {given['debug_logs']}, audit logs {given['audit_logs']}, sensitive content "
        f"kept {given['sensitive_retention_days']} days.",
        [],
    )


def _risk(inputs: Inputs) -> Verdict:
    release = inputs.release
    suggested = policy.suggested_risk(inputs.tier, release.change_kind)
    chosen = policy.effective_risk(release.risk, inputs.tier, release.change_kind)
    kind = release.get_change_kind_display().lower()
    if policy.RISK_ORDER.index(chosen) < policy.RISK_ORDER.index(suggested):
        if not release.risk_override_reason.strip():
            return (
                "fail",
                f"risk {chosen} is below the {suggested} suggested for a {kind} on a "
                f"{inputs.tier} service: give the reason for the override.",
                [],
            )
        return "pass", f"{chosen}, lowered from {suggested}: {release.risk_override_reason}", []
    if chosen != suggested:
        return "pass", f"{chosen}, raised from the {suggested} suggested.", []
    return "pass", f"{chosen}, as suggested for a {kind} on a {inputs.tier} service.", []


def _change_path(inputs: Inputs) -> Verdict:
    release = inputs.release
    if release.path == Release.Path.EMERGENCY:
        if not release.emergency_reason.strip():
            return "fail", "the emergency path needs the reason for bypassing sign-offs.", []
        hours = settings.RELEASES_EMERGENCY_SIGNOFF_HOURS
        return (
            "pass",
            f"emergency: {release.emergency_reason.strip()} (sign-offs due within {hours} h "
            "of the rollout's start).",
            [],
        )
    if release.path == Release.Path.NORMAL:
        return "pass", "normal path.", []
    template = release.standard_template
    if template is None:
        return "fail", "the standard path needs a standard change template.", []
    ref = _ref("standard_change_template", template.pk, str(template))
    problems = []
    if template.retired_at is not None:
        problems.append(f"template {template} was retired on {template.retired_at:%Y-%m-%d}")
    if template.tier != inputs.tier:
        problems.append(f"template {template} is for {template.tier} services, not {inputs.tier}")
    if template.change_kind != release.change_kind:
        problems.append(
            f"template {template} covers {template.change_kind}, not {release.change_kind}"
        )
    risk = policy.effective_risk(release.risk, inputs.tier, release.change_kind)
    if policy.RISK_ORDER.index(risk) > policy.RISK_ORDER.index(template.max_risk):
        problems.append(f"risk {risk} is above the template's {template.max_risk}")
    if problems:
        return "fail", "; ".join(problems) + ".", [ref]
    return "pass", f"standard change {template}: {template.title}.", [ref]


def _decommission_plan(inputs: Inputs) -> Verdict:
    release = inputs.release
    moves = [m for m in release.decommission_moves if isinstance(m, dict)]
    moved_tenants = {m.get("name") for m in moves if m.get("kind") == "tenant"}
    problems = []
    if not moves:
        problems.append("no moves recorded: say which tenants, tasks and sample sets go where")
    left = [t for t in release.service.tenants or [] if t not in moved_tenants]
    if left:
        problems.append(f"tenants not moved anywhere: {_listing([str(t) for t in left])}")
    unnamed = [m.get("name", "?") for m in moves if not (m.get("moved_to") or "").strip()]
    if unnamed:
        problems.append(f"no destination for {_listing(unnamed)}")
    if problems:
        return "fail", "; ".join(problems) + ".", []
    return "pass", f"{len(moves)} moves recorded.", []


def blackout_at(
    windows: list[BlackoutWindow], moment: dt.datetime
) -> tuple[BlackoutWindow, tuple[dt.datetime, dt.datetime]] | None:
    for window in windows:
        span = window.occurrence_containing(moment)
        if span is not None:
            return window, span
    return None


def _blackout(inputs: Inputs) -> Verdict:
    release = inputs.release
    start = release.planned_start
    if start is None:
        return "pass", "no planned start: blackout windows are checked when the rollout starts.", []
    found = blackout_at(inputs.windows, start)
    if found is None:
        return (
            "pass",
            f"planned start {start:%Y-%m-%d %H:%M %Z} is outside every blackout window.",
            [],
        )
    window, (begins, ends) = found
    scope = "every service" if window.service_id is None else release.service.slug
    text = (
        f"planned start {start:%Y-%m-%d %H:%M %Z} falls inside the blackout window "
        f"'{window.name}' for {scope} ({begins:%Y-%m-%d %H:%M} to {ends:%Y-%m-%d %H:%M %Z})"
    )
    ref = _ref("blackout_window", window.pk, window.name)
    if release.path == Release.Path.EMERGENCY:
        return "pass", f"{text}; the emergency path may start inside it.", [ref]
    return "fail", f"{text}: pick a start outside it.", [ref]


def emergency_overdue(
    release: Release, states: list[SignOffState], required: tuple[str, ...], now: dt.datetime
) -> bool:
    """An emergency release whose sign-offs were due and are not all given."""
    if release.signoffs_due_at is None or release.signoffs_due_at > now:
        return False
    approved = {s.signoff.role for s in states if s.standing and s.signoff.decision == "approve"}
    return not set(required) <= approved


def _signoffs_gate(
    inputs: Inputs, states: list[SignOffState], required: tuple[str, ...], overdue: bool
) -> GateResult:
    standing = [s.signoff for s in states if s.standing]
    rejected = [s for s in standing if s.decision == SignOff.Decision.REJECT]
    approved = {s.role for s in standing if s.decision == SignOff.Decision.APPROVE}
    waiting = [r for r in required if r not in approved]
    labels = dict(SignOff.Role.choices)
    status: Status
    if rejected:
        status = "fail"
        reason = "; ".join(
            f"rejected by {s.signer.get_username()} for {labels[s.role].lower()}"
            + (f": {s.comment}" if s.comment else "")
            for s in rejected
        )
    elif not required:
        status, reason = "pass", f"{inputs.tier} releases need no sign-off."
    elif waiting:
        status = "pending"
        reason = f"awaiting {_listing([labels[r].lower() for r in waiting])}"
        due = inputs.release.signoffs_due_at
        if overdue and due is not None:
            reason += f"; overdue since {due:%Y-%m-%d %H:%M %Z}"
        elif due is not None:
            reason += f"; due by {due:%Y-%m-%d %H:%M %Z}"
    else:
        status = "pass"
        reason = "approved by " + ", ".join(
            f"{s.signer.get_username()} ({labels[s.role].lower()})"
            for s in standing
            if s.role in required
        )
    return GateResult(
        key="signoffs",
        title=policy.GATES["signoffs"],
        status=status,
        reason=reason + ("" if reason.endswith(".") else "."),
        evidence=[],
        waiver=None,
    )


_JUDGES = {
    "license": _license,
    "provenance": _provenance,
    "image_pinned": _image_pinned,
    "load_evidence": _load_evidence,
    "metrics_coverage": _metrics_coverage,
    "replay": _replay,
    "failures_classified": _failures_classified,
    "rollback_plan": _rollback_plan,
    "gray_plan": _gray_plan,
    "logging_policy": _logging_policy,
    "risk": _risk,
    "change_path": _change_path,
    "decommission_plan": _decommission_plan,
    "blackout": _blackout,
}
