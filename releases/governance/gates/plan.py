"""Gates on the plan around the change: rollback, gray stages, logging, risk, path,
decommission moves, the calendar, and the sign-offs."""

from __future__ import annotations

import datetime as dt
import itertools

from django.conf import settings

from ledger.models import ModelAsset, Revision
from releases import policy
from releases.governance.gates.base import (
    EvidenceRef,
    GateResult,
    Inputs,
    SignOffState,
    Status,
    Verdict,
    cite,
    listing,
    revision_ref,
    run_ref,
)
from releases.models import BlackoutWindow, Release, SignOff
from releases.schemas import GUARDS
from replay.models import Run


def rollback_plan(inputs: Inputs) -> Verdict:
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
    problems = [f"the rollback plan lacks {listing(missing, 6)}"] if missing else []
    refs: list[EvidenceRef] = []
    unverified = ""
    if target is not None:
        refs.append(revision_ref(target))
        if target.pk == release.to_revision_id:
            problems.append("the rollback target cannot be the candidate itself")
        elif target.service_id != release.service_id:
            problems.append(f"the rollback target {target} belongs to another service")
        elif inputs.target_rolled_back is not None:
            rolled_back = inputs.target_rolled_back
            problems.append(
                f"the rollback target {rolled_back.sentence(release.service.slug)}, and no "
                "release has put it live since: name another target"
            )
        else:
            problems.extend(_verification_problems(inputs, target, refs))
            problems.extend(_not_ready(inputs, target))
            unverified = _unknown_verification(inputs, target)
    if problems:
        return "fail", "; ".join(problems) + ".", refs
    if unverified:
        return "pending", unverified, refs
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
    refs.append(run_ref(run))
    if run.verdict == Run.Verdict.ERRORED:
        return []  # unknown, not failed: `_unknown_verification`
    if run.verdict != Run.Verdict.PASSED:
        return [f"the last verification of {target.label} {run.verdict} — run #{run.pk}"]
    age = inputs.now - (run.finished_at or inputs.now)
    if age > dt.timedelta(days=limit):
        return [
            f"{target.label} was last verified {age.days} days ago — run #{run.pk}; "
            f"{inputs.tier} releases need a verification within {limit} days"
        ]
    return []


def _not_ready(inputs: Inputs, target: Revision) -> list[str]:
    """What keeps the target from being ready, asked only of a release touching a task
    type that must never degrade silently (the verification is asked of every plan)."""
    strict = inputs.never_degrading
    if not strict:
        return []
    because = f"{', '.join(strict)} must never degrade silently, so the target must be ready"
    problems = []
    if not target.runtime.image_digest:
        problems.append(
            f"{target.label}'s image {target.runtime.image} is not pinned by digest ({because})"
        )
    lifecycle = target.model_asset.lifecycle
    if lifecycle in (ModelAsset.Lifecycle.RETIRED, ModelAsset.Lifecycle.DEPRECATED):
        problems.append(f"{target.label}'s model asset is {lifecycle} ({because})")
    return problems


def _unknown_verification(inputs: Inputs, target: Revision) -> str:
    """The target's last verification reached no backend: not verified yet, and no
    verdict against it either ("" when it did reach one)."""
    run = inputs.verification
    if run is None or run.verdict != Run.Verdict.ERRORED:
        return ""
    return (
        f"{target.label} is not verified yet: it awaits confirmation, since its last "
        f"verification — run #{run.pk} — could not reach its backend, which says nothing "
        f"about {target.label}. Verify it now."
    )


def gray_plan(inputs: Inputs) -> Verdict:
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
    strict = inputs.never_degrading
    if strict:
        needed += policy.STRICT_EXTRA_STAGES
    if below < needed:
        problems.append(
            f"{tier} releases need at least {needed} stages below 100 % traffic"
            + (f" when {', '.join(strict)} must never degrade silently" if strict else "")
            + f"; the plan has {below}"
        )
    for number, stage in enumerate(stages, start=1):
        guards = stage.get("guards") or {}
        lacking = [
            GUARDS[g] if guards.get(g) is None else f"{GUARDS[g]} (only a dry run)"
            for g in policy.REQUIRED_GUARDS[tier]
            if guards.get(g) is None or (isinstance(guards[g], dict) and guards[g].get("dry_run"))
        ]
        if lacking and stage.get("traffic_pct", 0) < 100:
            problems.append(f"stage {number} has no guard on {listing(lacking)}")
        analysis = stage.get("analysis") or {}
        if analysis.get("on_breach") == "rollback" and tier not in policy.ANALYSIS_MAY_ROLL_BACK:
            problems.append(
                f"stage {number}'s analysis may not roll back by itself on a {tier} service "
                "(releases/policy.py ANALYSIS_MAY_ROLL_BACK): hold for a person instead"
            )
    if problems:
        return "fail", "; ".join(problems) + ".", []
    plan = " → ".join(f"{share:g} %" for share in shares)
    return "pass", f"{len(stages)} stages: {plan}.", []


def logging_policy(inputs: Inputs) -> Verdict:
    given = inputs.release.logging_policy or {}
    labels = {
        "debug_logs": "debug logs",
        "audit_logs": "audit logs",
        "sensitive_retention_days": "sensitive-content retention",
    }
    missing = [label for key, label in labels.items() if given.get(key) is None]
    if missing:
        return "fail", f"the logging policy does not say {listing(missing)}.", []
    return (
        "pass",
        f"debug logs {given['debug_logs']}, audit logs {given['audit_logs']}, sensitive content "
        f"kept {given['sensitive_retention_days']} days.",
        [],
    )


def _with_article(noun: str) -> str:
    """ "an engine upgrade", "a model upgrade"."""
    return f"{'an' if noun[:1] in 'aeiou' else 'a'} {noun}"


def risk(inputs: Inputs) -> Verdict:
    release = inputs.release
    strict = inputs.never_degrading
    suggested = policy.suggested_risk(inputs.tier, release.change_kind, strict=bool(strict))
    chosen = policy.effective_risk(
        release.risk, inputs.tier, release.change_kind, strict=bool(strict)
    )
    kind = _with_article(release.get_change_kind_display().lower())
    if strict:
        kind += f" touching {', '.join(strict)}, which must never degrade silently,"
    if policy.RISK_ORDER.index(chosen) < policy.RISK_ORDER.index(suggested):
        if not release.risk_override_reason.strip():
            return (
                "fail",
                f"risk {chosen} is below the {suggested} suggested for {kind} on "
                f"{_with_article(inputs.tier)} service: give the reason for the override.",
                [],
            )
        return "pass", f"{chosen}, lowered from {suggested}: {release.risk_override_reason}", []
    if chosen != suggested:
        return "pass", f"{chosen}, raised from the {suggested} suggested.", []
    return (
        "pass",
        f"{chosen}, as suggested for {kind} on {_with_article(inputs.tier)} service.",
        [],
    )


def change_path(inputs: Inputs) -> Verdict:
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
    ref = cite("standard_change_template", template.pk, str(template))
    problems = []
    if template.retired_at is not None:
        problems.append(f"template {template} was retired on {template.retired_at:%Y-%m-%d}")
    if template.tier != inputs.tier:
        problems.append(f"template {template} is for {template.tier} services, not {inputs.tier}")
    if template.change_kind != release.change_kind:
        problems.append(
            f"template {template} covers {template.change_kind}, not {release.change_kind}"
        )
    risk = policy.effective_risk(
        release.risk, inputs.tier, release.change_kind, strict=bool(inputs.never_degrading)
    )
    if policy.RISK_ORDER.index(risk) > policy.RISK_ORDER.index(template.max_risk):
        problems.append(f"risk {risk} is above the template's {template.max_risk}")
    if problems:
        return "fail", "; ".join(problems) + ".", [ref]
    return "pass", f"standard change {template}: {template.title}.", [ref]


def retirement_plan(inputs: Inputs) -> Verdict:
    plan = inputs.release.retirement_plan.strip()
    if not plan:
        return (
            "fail",
            f"{inputs.tier} releases need a retirement plan before going live: what "
            "triggers it, the notice tenants get, where their traffic goes.",
            [],
        )
    return "pass", f"recorded: {plan[:120]}{'…' if len(plan) > 120 else ''}", []


def decommission_plan(inputs: Inputs) -> Verdict:
    release = inputs.release
    moves = [m for m in release.decommission_moves if isinstance(m, dict)]
    moved_tenants = {m.get("name") for m in moves if m.get("kind") == "tenant"}
    problems = []
    if not moves:
        problems.append("no moves recorded: say which tenants, tasks and sample sets go where")
    left = [t for t in release.service.tenants or [] if t not in moved_tenants]
    if left:
        problems.append(f"tenants not moved anywhere: {listing([str(t) for t in left])}")
    unnamed = [m.get("name", "?") for m in moves if not (m.get("moved_to") or "").strip()]
    if unnamed:
        problems.append(f"no destination for {listing(unnamed)}")
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


def blackout(inputs: Inputs) -> Verdict:
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
    ref = cite("blackout_window", window.pk, window.name)
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


def signoffs_gate(
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
        reason = f"awaiting {listing([labels[r].lower() for r in waiting])}"
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
