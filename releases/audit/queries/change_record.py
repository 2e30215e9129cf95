"""A release read as a change record, the way a change-management auditor reads one
(SOC 2 CC8.1, ISO/IEC 27001:2022 A.8.32): what changed, who asked, who approved in
which role, whether separation of duties held, the test evidence with its digests,
when it was implemented, its rollout, its rollback plan and whether it was used,
the waivers and who granted them, and the post-implementation review.

The evidence is what the approvers signed: the snapshot the standing approvals are
bound to (its load-test reports and replay runs), or, before anyone approved, what
the gates read now. A bounded number of queries whatever the release holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import Group
from django.utils.translation import gettext as _

from ledger import queries as ledger_queries
from ledger.models import Event, LoadTestReport, Revision
from ledger.roles import Role
from releases import policy
from releases.governance import gates as release_gates
from releases.governance.queries.pages import RELEASE_SUBJECT
from releases.governance.queries.rollout import Rollout, rollout_of
from releases.models import Release, RollbackEvent, SignOff, Waiver
from replay import queries as replay_queries
from replay.models import Run


@dataclass
class DutyCheck:
    title: str
    held: bool
    detail: str


@dataclass
class ChangeRecord:
    release: Release
    assessment: release_gates.Assessment
    rollback_target: Revision | None
    rollout: Rollout | None
    rollbacks: list[RollbackEvent]
    verification: Run | None
    diff: dict[str, Any]
    approvals: list[dict[str, Any]]
    required_labels: list[str]
    duties: list[DutyCheck]
    evidence_source: str
    reports: list[LoadTestReport]
    runs: list[Run]
    waivers: list[Waiver]
    events: list[Event]
    roles_of: dict[int, list[str]] = field(default_factory=dict)

    @property
    def last_event(self) -> Event | None:
        return self.events[-1] if self.events else None

    @property
    def requester_roles(self) -> list[str]:
        return self.roles_of.get(self.release.filed_by_id, [])

    @property
    def duties_held(self) -> bool:
        return all(check.held for check in self.duties)


def _diff(release: Release) -> dict[str, Any]:
    ids = [pk for pk in (release.from_revision_id, release.to_revision_id) if pk]
    revisions = {r.pk: r for r in Revision.objects.with_parts().filter(pk__in=ids)}
    to_revision = revisions[release.to_revision_id]
    if release.from_revision_id is None:
        return {"from_revision": None, "to_revision": to_revision, "changes": [], "breaking": []}
    from_revision = revisions[release.from_revision_id]
    changes = ledger_queries.revision_diff(from_revision, to_revision)
    return {
        "from_revision": from_revision,
        "to_revision": to_revision,
        "changes": changes,
        "breaking": ledger_queries.breaking_changes(changes),
    }


def _duties(
    release: Release, standing: list[SignOff], required: tuple[str, ...], waivers: list[Waiver]
) -> list[DutyCheck]:
    labels = dict(SignOff.Role.choices)
    by_filer = [s for s in standing if s.signer_id == release.filed_by_id]
    filer = release.filed_by.get_username()
    checks = [
        DutyCheck(
            "The requester did not approve",
            not by_filer,
            f"{filer} filed the release and gave no standing sign-off."
            if not by_filer
            else f"{filer} filed the release and also signed for "
            f"{', '.join(labels[s.role].lower() for s in by_filer)}.",
        )
    ]
    roles_per_signer: dict[int, list[str]] = {}
    for signoff in standing:
        roles_per_signer.setdefault(signoff.signer_id, []).append(signoff.role)
    doubled = {pk: roles for pk, roles in roles_per_signer.items() if len(roles) > 1}
    names = {s.signer_id: s.signer.get_username() for s in standing}
    checks.append(
        DutyCheck(
            "One person, one role",
            not doubled,
            f"{len(roles_per_signer)} people signed {len(standing)} role"
            f"{'' if len(standing) == 1 else 's'}, each one role."
            if not doubled
            else "; ".join(
                f"{names[pk]} signed {', '.join(labels[r].lower() for r in roles)}"
                for pk, roles in doubled.items()
            ),
        )
    )
    approvals = [s for s in standing if s.decision == SignOff.Decision.APPROVE]
    approved_roles = {s.role for s in approvals}
    missing = [labels[r].lower() for r in required if r not in approved_roles]
    # A superuser who does not hold the role signed it: an administrator's approval, not
    # the role's (SignOff.as_administrator).
    by_administrator = [s for s in approvals if s.as_administrator and s.role in required]
    if not required:
        detail = "The tier and path need no sign-off."
    elif missing:
        detail = f"Not approved yet for {', '.join(missing)}."
    elif by_administrator:
        detail = _("Not by the roles themselves: %(who)s.") % {
            "who": "; ".join(
                _(
                    "%(user)s signed for %(role)s as an administrator, without holding the "
                    "%(needed)s role"
                )
                % {
                    "user": names[s.signer_id],
                    "role": labels[s.role].lower(),
                    "needed": Role(policy.SIGNER_ROLES[s.role]).label.lower(),
                }
                for s in by_administrator
            )
        }
    else:
        detail = f"Every required role approved: {', '.join(labels[r].lower() for r in required)}."
    checks.append(
        DutyCheck("Every required role approved", not missing and not by_administrator, detail)
    )
    # Refused since issue 26; a record made before says so.
    own = [
        f"{names[s.signer_id]} waived {w.gate} and signed for {labels[s.role].lower()}"
        for s in standing
        for w in waivers
        if w.revoked_at is None
        and w.granted_by_id == s.signer_id
        and policy.waiver_owner(w.gate) == s.role
    ]
    if own:
        detail = "; ".join(own) + "."
    elif any(w.revoked_at is None for w in waivers):
        detail = "No one signed the role whose gate they waived."
    else:
        detail = "No gate was waived."
    checks.append(DutyCheck("No signer approved their own waiver", not own, detail))
    return checks


def change_record(release: Release) -> ChangeRecord:
    assessment = release_gates.assess(release)
    release = assessment.release
    target = release.rollback_target or release.from_revision
    standing = [s.signoff for s in assessment.signoffs if s.signoff.voided_at is None]
    approvals: list[dict[str, Any]] = [
        {"signoff": s.signoff, "standing": s.standing, "void_reason": s.void_reason}
        for s in assessment.signoffs
    ]
    # The evidence the approvers signed: the snapshot of the latest standing approval.
    signed = [
        s
        for s in standing
        if s.decision == SignOff.Decision.APPROVE and isinstance(s.snapshot, dict)
    ]
    if signed:
        snapshot = max(signed, key=lambda s: s.signed_at).snapshot
        source = "the snapshot the approvers signed"
    else:
        snapshot = assessment.snapshot
        source = "what the gates read now (no approval yet)"
    report_ids = [e["report"] for e in snapshot.get("evidence", {}).values()]
    run_ids = [s["run"] for s in snapshot.get("sample_sets", {}).values()]
    reports = list(
        LoadTestReport.objects.filter(pk__in=report_ids)
        .select_related("uploaded_by")
        .defer("results", "goodput_levels", "warnings")
        .order_by("workload", "pk")
    )
    runs = list(
        Run.objects.filter(pk__in=run_ids)
        .select_related("sample_set", "backend")
        .order_by("sample_set__name", "pk")
    )
    waivers = list(
        Waiver.objects.filter(release=release)
        .select_related("granted_by", "revoked_by")
        .order_by("granted_at", "pk")
    )
    events = list(Event.objects.for_subject(RELEASE_SUBJECT, release.pk).order_by("sequence")[:500])
    signer_ids = {s.signoff.signer_id for s in assessment.signoffs} | {release.filed_by_id}
    roles_of: dict[int, list[str]] = {}
    for user_id, name in Group.objects.filter(user__in=signer_ids).values_list("user", "name"):
        roles_of.setdefault(user_id, []).append(name.replace("_", " "))
    for approval in approvals:
        approval["roles"] = roles_of.get(approval["signoff"].signer_id, [])
    return ChangeRecord(
        release=release,
        assessment=assessment,
        rollout=rollout_of(release),
        rollbacks=list(
            RollbackEvent.objects.filter(release=release)
            .select_related("to_revision", "recorded_by", "verification_run")
            .order_by("started_at", "pk")
        ),
        rollback_target=target,
        verification=replay_queries.last_verification(target) if target else None,
        diff=_diff(release),
        approvals=approvals,
        required_labels=[dict(SignOff.Role.choices)[r].lower() for r in assessment.required_roles],
        duties=_duties(release, standing, assessment.required_roles, waivers),
        evidence_source=source,
        reports=reports,
        runs=runs,
        waivers=waivers,
        events=events,
        roles_of=roles_of,
    )


__all__ = ["ChangeRecord", "DutyCheck", "change_record"]
