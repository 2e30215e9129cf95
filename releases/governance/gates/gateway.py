"""The gateway_policy gate: does the candidate's gateway policy say what the tier needs?

What a tier needs is `policy.GATEWAY_POLICY_NEEDS`. A tier in
`policy.ADVISORY_GATEWAY_TIERS` is told what is missing without being held back
(the `advisory` status).
"""

from __future__ import annotations

from typing import Any

from django.urls import reverse

from ledger.gateway_policy import LIMITS
from ledger.models import GatewayPolicy
from releases import policy
from releases.governance.gates.base import EvidenceRef, Inputs, Verdict, cite, listing
from releases.governance.playbooks import degradation_for

# What a task type that must never degrade silently may do when the service degrades.
NEVER_DEGRADE_ACTIONS = ("stop", "human_review")


def policy_ref(gateway_policy: GatewayPolicy, service_slug: str) -> EvidenceRef:
    url = reverse(
        "releases:gateway_policy_version",
        kwargs={"slug": service_slug, "version": gateway_policy.version},
    )
    return cite(
        "gateway_policy",
        gateway_policy.pk,
        f"{service_slug} gateway policy {gateway_policy.label}",
        url,
    )


def gateway_policy(inputs: Inputs) -> Verdict:
    release = inputs.release
    service = release.service
    candidate = release.to_revision
    found = candidate.gateway_policy
    if found is None:
        problems = [
            f"{candidate.label} names no gateway policy: record one on {service.slug}'s "
            "gateway policy page and name its version on the revision"
        ]
        return _verdict(inputs, problems, [])
    refs = [policy_ref(found, service.slug)]
    if found.document is None:
        problems = [
            f"{candidate.label} names gateway policy {found.label}, whose document was never "
            f"recorded: record it as a version on {service.slug}'s gateway policy page"
        ]
        return _verdict(inputs, problems, refs)
    needs = policy.GATEWAY_POLICY_NEEDS[inputs.tier]
    problems = document_gaps(
        found.document,
        needs=needs,
        tenants=list(service.tenants or []),
        task_types=inputs.served_task_types,
    )
    verdict = _verdict(inputs, problems, refs)
    if verdict[0] != "pass":
        return verdict
    limits = found.document.get("limits", {})
    said = [f"{found.label}: {len(found.document.get('tenants', []))} tenant(s) with quotas"]
    if "max_input_tokens" in limits:
        said.append(
            f"input ≤ {limits['max_input_tokens']} tokens, output ≤ "
            f"{limits.get('max_output_tokens', '—')}"
        )
    if "egress" in found.document:
        allowed = found.document["egress"]["external_fallback_allowed"]
        said.append("external fallback allowed" if allowed else "no external fallback")
    return "pass", "; ".join(said) + ".", refs


def document_gaps(
    document: dict[str, Any],
    *,
    needs: tuple[str, ...],
    tenants: list[str],
    task_types: tuple[str, ...],
) -> list[str]:
    """What the document lacks of `needs` (limits, tenants, degradation, egress)."""
    problems = []
    if "limits" in needs:
        limits = document.get("limits", {})
        missing = [name for name in LIMITS if name not in limits]
        if missing:
            problems.append(f"limits lack {listing(missing)}")
    if "tenants" in needs:
        listed = {tenant["name"]: tenant for tenant in document.get("tenants", [])}
        absent = [name for name in tenants if name not in listed]
        if absent:
            problems.append(f"tenant(s) {listing(absent)} of the service have no quota")
        unquoted = [
            name
            for name in tenants
            if name in listed and not ("rpm" in listed[name] and "tpm" in listed[name])
        ]
        if unquoted:
            problems.append(f"tenant(s) {listing(unquoted)} lack rpm or tpm")
        if not tenants:
            problems.append("the service lists no tenant, so nobody has a quota")
    if "degradation" in needs:
        rules = document.get("degradation", {})
        uncovered = [task for task in task_types if task not in rules]
        if uncovered:
            problems.append(f"no degradation for task type(s) {listing(uncovered)}")
        for task in task_types:
            action = rules.get(task, {}).get("action")
            if (
                action
                and action not in NEVER_DEGRADE_ACTIONS
                and not degradation_for(task).may_degrade
            ):
                problems.append(
                    f"{task} must never degrade silently: it may only stop or go to human "
                    f"review, not {action.replace('_', ' ')}"
                )
    if "egress" in needs and "egress" not in document:
        problems.append("egress is not stated (may a request leave for an external API?)")
    return problems


def _verdict(inputs: Inputs, problems: list[str], refs: list[EvidenceRef]) -> Verdict:
    if not problems:
        return "pass", "", refs
    reason = "; ".join(problems) + "."
    if inputs.tier in policy.ADVISORY_GATEWAY_TIERS:
        return "advisory", f"advisory on the {inputs.tier} tier: {reason}", refs
    return "fail", reason, refs
