"""What the gates share: the result shapes, what they read, and how they cite it."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from django.urls import reverse
from django.utils.translation import gettext as _

from ledger.models import Capability, LoadTestReport, PriceSheet, Revision
from releases.governance.playbooks import never_degrading
from releases.governance.queries.rolled_back import RolledBack
from releases.models import BlackoutWindow, Drill, Release, SignOff, Waiver
from replay.models import Run

# `advisory`: the gate found something missing on a tier that does not require it; it
# holds nothing back (only `fail` and `pending` do).
Status = Literal["pass", "fail", "waived", "pending", "advisory"]


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
    # Whether the candidate's asset has its gated license terms accepted (read only then).
    license_accepted: bool
    windows: list[BlackoutWindow]
    waivers: list[Waiver]
    signoffs: list[SignOff]
    # The slugs of the task types the service serves (read for the gateway_policy gate).
    served_task_types: tuple[str, ...] = ()
    # The rollback target was rolled back off the service, and no release put it live since.
    target_rolled_back: RolledBack | None = None
    # The price sheet in force for the candidate's GPU model (read for the cost_record gate).
    price_sheet: PriceSheet | None = None
    # Drills run against the candidate, newest first (read when a peak rate is stated).
    drills: list[Drill] = field(default_factory=list)
    # The downstream systems the revision diff suggests, with the fields that suggest
    # each (`releases.governance.impact`), and the sample tags of each required sample
    # set's newest version (read for the impact_assessed gate).
    impact_suggested: dict[str, list[str]] = field(default_factory=dict)
    set_tags: dict[str, set[str]] = field(default_factory=dict)
    # The candidate's `metrics` capability: what a probe found on its engine's /metrics.
    metrics_capability: Capability | None = None
    # The from- and to-revisions' capabilities, kind → value by revision id, when read
    # (a page showing the diff reuses them).
    declared_capabilities: dict[int, dict[str, Any]] = field(default_factory=dict)
    # Filled while judging: what the snapshot binds to.
    evidence_used: dict[str, LoadTestReport] = field(default_factory=dict)

    @property
    def rollback_target(self) -> Revision | None:
        return self.release.rollback_target or self.release.from_revision

    @property
    def never_degrading(self) -> list[str]:
        """The impacted task types that must never degrade silently: the release is a
        risk step up, with one more gray stage and a ready rollback target."""
        return never_degrading(t for t in self.release.impact_task_types if isinstance(t, str))


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
    # What it was judged from: `rejudge` judges again without reading anything.
    inputs: Inputs | None = field(default=None, repr=False, compare=False)

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


Verdict = tuple[Status, str, list[EvidenceRef]]


def waiver_refusal(gate: GateResult) -> str | None:
    """Why `gate`, as judged now, takes no waiver, or None when it may be waived: a waiver
    is for a gate that does not pass, one at a time. The waiver verb and the release page
    both ask it (who may waive it: `permissions.waiver_refusal`)."""
    if gate["status"] == "pass":
        return _("The “%(gate)s” gate passes: a waiver is for a gate that does not pass.") % {
            "gate": _(gate["title"])
        }
    if gate["status"] == "advisory":
        return _(
            "The “%(gate)s” gate is advisory on this service's tier: it holds nothing back, "
            "so there is nothing to waive."
        ) % {"gate": _(gate["title"])}
    if gate["status"] == "waived" and gate["waiver"] is not None:
        return (
            f"The {gate['key']} gate is already waived until "
            f"{gate['waiver']['expires_at']:%Y-%m-%d %H:%M %Z}; revoke that waiver first."
        )
    return None


def cite(kind: str, id_: int | str | None, label: str, url: str = "") -> EvidenceRef:
    return EvidenceRef(kind=kind, id=id_, label=label, url=url)


def revision_ref(revision: Revision) -> EvidenceRef:
    url = reverse(
        "ledger:revision_detail",
        kwargs={"slug": revision.service.slug, "number": revision.number},
    )
    return cite("revision", revision.pk, f"{revision.service.slug} {revision.label}", url)


def report_ref(report: LoadTestReport) -> EvidenceRef:
    url = reverse(
        "ledger:loadtest_detail",
        kwargs={
            "slug": report.revision.service.slug,
            "number": report.revision.number,
            "pk": report.pk,
        },
    )
    return cite("loadtest_report", report.pk, f"report #{report.pk}", url)


def run_ref(run: Run) -> EvidenceRef:
    return cite(
        "replay_run",
        run.pk,
        f"run #{run.pk} ({run.sample_set})",
        reverse("replay:run_detail", kwargs={"pk": run.pk}),
    )


def listing(items: list[str], limit: int = 5) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")
