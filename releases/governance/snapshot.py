"""What a signer approves: the canonical snapshot of a release, and what changed since.

The snapshot has six parts: the form's fields, the gate results (all but
sign-offs, which a signature itself changes), the load-test reports the
evidence gate used (id and raw-file SHA-256 per workload class), the replay
runs of the required sample sets (set version, run, verdict), the
fingerprints of the from-, to- and rollback-target revisions, and the gateway
policy version the candidate runs with (its label and document's SHA-256, None
while the document is unknown). Its hash is the
SHA-256 of its canonical JSON (`ledger.chain.canonical_json`, the text events
are hashed from). A sign-off keeps both; `what_changed` compares a kept
snapshot with today's and says, part by part, what moved.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any, cast

from django.db import models

from ledger.chain import canonical_json
from ledger.models import Revision
from releases.models import Release

if TYPE_CHECKING:
    from releases.governance.gates.base import GateResult, Inputs

# The form's fields as the snapshot and the release's events record them.
FORM_FIELDS: tuple[str, ...] = (
    "service",
    "to_revision",
    "change_kind",
    "risk",
    "risk_override_reason",
    "summary",
    "impact_tenants",
    "impact_task_types",
    "impact_downstream",
    "impact_dismissed",
    "required_sample_sets",
    "known_limitations",
    "compatible_request_formats",
    "metrics_declared",
    "failure_classifications",
    "gray_stages",
    "rollback_target",
    "rollback_kind",
    "rollback_triggers",
    "rollback_expected_minutes",
    "rollback_impact_scope",
    "rollback_verification_set",
    "planned_peak_rps",
    "retirement_plan",
    "decommission_moves",
    "logging_policy",
    "path",
    "standard_template",
    "emergency_reason",
    "planned_start",
)


def attname(name: str) -> str:
    """The column attribute of a form field (`rollback_target` → `rollback_target_id`)."""
    return cast("models.Field", Release._meta.get_field(name)).attname


# Fields added after sign-offs were recorded: left out of a snapshot while empty, so the
# releases that never used them keep the digest their signers approved.
_OMITTED_WHEN_EMPTY = frozenset({"planned_peak_rps", "impact_dismissed", "retirement_plan"})


def form_values(release: Release) -> dict[str, Any]:
    values = {}
    for name in FORM_FIELDS:
        value = getattr(release, attname(name))
        if value in (None, [], "") and name in _OMITTED_WHEN_EMPTY:
            continue
        values[name] = value
    # Through JSON once, so a datetime reads as the text canonical JSON gives it.
    return _plain(values)


def _plain(value: Any) -> Any:
    import json

    return json.loads(canonical_json(value))


def build(inputs: Inputs, gates: list[GateResult]) -> dict[str, Any]:
    release = inputs.release
    target = inputs.rollback_target
    return {
        "form": form_values(release),
        "gates": {g["key"]: [g["status"], g["reason"]] for g in gates},
        "evidence": {
            workload: {"report": report.pk, "sha256": report.raw_sha256}
            for workload, report in inputs.evidence_used.items()
        },
        "sample_sets": {
            name: {"set": str(run.sample_set), "run": run.pk, "verdict": run.verdict}
            for name, run in sorted(inputs.runs.items())
        },
        "revisions": {
            "from": release.from_revision.fingerprint if release.from_revision else None,
            "to": release.to_revision.fingerprint,
            "rollback_target": target.fingerprint if target else None,
        },
        "gateway_policy": gateway_policy_part(release.to_revision),
    }


def gateway_policy_part(revision: Revision) -> dict[str, Any] | None:
    found = revision.gateway_policy
    if found is None:
        return None
    return {"version": found.label, "sha256": found.sha256 if found.known else None}


def digest(snapshot: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_json(snapshot).encode()).hexdigest()


def _field_label(name: str) -> str:
    return str(cast("models.Field", Release._meta.get_field(name)).verbose_name)


def what_changed(before: dict[str, Any], after: dict[str, Any]) -> str:
    """In plain words, what differs between a snapshot a signer saw and today's."""
    said: list[str] = []
    form_b, form_a = before.get("form", {}), after.get("form", {})
    fields = [n for n in FORM_FIELDS if form_b.get(n) != form_a.get(n)]
    if fields:
        said.append(f"{', '.join(_field_label(n) for n in fields)} changed")
    ev_b, ev_a = before.get("evidence", {}), after.get("evidence", {})
    for workload in sorted(set(ev_b) | set(ev_a)):
        old, new = ev_b.get(workload), ev_a.get(workload)
        if old == new:
            continue
        if old and new and old["report"] != new["report"]:
            said.append(
                f"load-test report #{old['report']} ({workload}) replaced by #{new['report']}"
            )
        elif old and new:
            said.append(f"load-test report #{old['report']} ({workload}) changed")
        elif old:
            said.append(f"load-test report #{old['report']} ({workload}) no longer current")
        else:
            said.append(f"load-test report #{new['report']} ({workload}) added")
    sets_b, sets_a = before.get("sample_sets", {}), after.get("sample_sets", {})
    for name in sorted(set(sets_b) | set(sets_a)):
        old, new = sets_b.get(name), sets_a.get(name)
        if old == new:
            continue
        if old and new:
            said.append(
                f"replay of {name} is now run #{new['run']} ({new['verdict']}), "
                f"was run #{old['run']} ({old['verdict']})"
            )
        elif new:
            said.append(f"replay of {name} (run #{new['run']}) added")
        else:
            said.append(f"replay of {name} (run #{old['run']}) no longer counted")
    rev_b, rev_a = before.get("revisions", {}), after.get("revisions", {})
    names = {"from": "from-revision", "to": "to-revision", "rollback_target": "rollback target"}
    for key, label in names.items():
        if rev_b.get(key) != rev_a.get(key):
            said.append(f"the {label}'s fingerprint changed")
    policy_b, policy_a = before.get("gateway_policy"), after.get("gateway_policy")
    if "gateway_policy" not in before:
        said.append("the snapshot now names the candidate's gateway policy")
    elif policy_b != policy_a:
        was = policy_b["version"] if policy_b else "none"
        now = policy_a["version"] if policy_a else "none"
        said.append(f"the gateway policy is now {now}, was {was}")
    gates_b, gates_a = before.get("gates", {}), after.get("gates", {})
    for key in sorted(set(gates_b) | set(gates_a)):
        old, new = gates_b.get(key), gates_a.get(key)
        if old == new:
            continue
        if old and new and old[0] != new[0]:
            said.append(f"gate {key} went from {old[0]} to {new[0]}")
        elif old and new:
            said.append(f"gate {key} now says: {new[1]}")
        elif new:
            said.append(f"gate {key} now applies")
        else:
            said.append(f"gate {key} no longer applies")
    if not said:
        return "voided: the release changed after you approved"
    return "voided: " + "; ".join(said) + " after you approved"
