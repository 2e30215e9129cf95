"""The peak_drill gate: has the candidate of a capacity change carried its planned peak?

A capacity change states the peak arrival rate it is for (`Release.planned_peak_rps`;
required on the tiers of `policy.PEAK_RATE_REQUIRED_TIERS`, elsewhere optional). With a
rate, the gate passes when a drill run against the candidate (`Drill.revision`) had every
task type meet its bounds at that rate or above: its knee (`releases.drills.judge`), which
counts only load delivered as planned. The newest such drill is cited; when none reached
the rate, the newest drill of the candidate says how far it got.
"""

from __future__ import annotations

from django.urls import reverse

from releases import policy
from releases.governance.gates.base import EvidenceRef, Inputs, Verdict, cite
from releases.models import Drill


def _ref(drill: Drill) -> EvidenceRef:
    return cite(
        "drill",
        drill.pk,
        f"drill #{drill.pk} {drill.name}",
        reverse("releases:drill_detail", args=[drill.pk]),
    )


def peak_drill(inputs: Inputs) -> Verdict:
    release = inputs.release
    peak = release.planned_peak_rps
    candidate = f"{release.service.slug} {release.to_revision.label}"
    if peak is None:
        if inputs.tier in policy.PEAK_RATE_REQUIRED_TIERS:
            return (
                "fail",
                f"A capacity change on a {inputs.tier} service states the planned peak rate "
                "(requests/s) it is for; a drill of the candidate at that rate then admits it.",
                [],
            )
        return (
            "pass",
            "No planned peak rate stated, so no drill is required; state one to require a "
            "drill of the candidate at it.",
            [],
        )
    ran = inputs.drills
    knees = [(d, (d.results or {}).get("knee_rate")) for d in ran]
    passing = [(d, knee) for d, knee in knees if knee is not None and knee >= peak]
    if passing:
        drill, knee = passing[0]
        return (
            "pass",
            f"Drill #{drill.pk} had every task type of {candidate} meet its bounds at "
            f"{knee:g}/s, at or above the planned peak of {peak:g}/s.",
            [_ref(drill)],
        )
    plan_one = reverse("releases:drill_new")
    if not ran:
        return (
            "fail",
            f"No drill of {candidate} has run: plan one at {peak:g}/s or more with "
            f"{candidate} as the revision under test ({plan_one}), and run it.",
            [],
        )
    newest, knee = knees[0]
    got = (
        f"every task type met its bounds only up to {knee:g}/s"
        if knee is not None
        else "no stage had every task type meet its bounds"
    )
    return (
        "fail",
        f"Drill #{newest.pk} of {candidate}: {got}; the planned peak is {peak:g}/s. Add "
        f"capacity and drill again, or lower the planned peak ({plan_one}).",
        [_ref(newest)],
    )
