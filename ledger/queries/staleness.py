"""Is load-test evidence current: bound to the revision's fingerprint, hardware and age,
and measured on what the revision serves.

Release gates call `current_reports(revision)` (stale and mismatched evidence is
not accepted, nor unverified evidence of a production service),
`evidence_status(report)` and `mismatched_reports(revision)`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Literal, NamedTuple, TypeVar

from django.conf import settings
from django.utils import timezone

from ledger.models import LoadTestReport, Revision, Service
from ledger.queries.evidence_match import describe, normalise_gpu

# mismatched: attached with a recorded reason although the file measured another
# model, engine or GPU (evidence_match); it never counts as current.
# unverified: the file names no model (LoadTestReport.model_verified), so nothing
# checked that it measured the revision; it counts below production only.
StatusWord = Literal["current", "stale", "mismatched", "unverified"]
_Report = TypeVar("_Report", bound=LoadTestReport)


class EvidenceStatus(NamedTuple):
    status: StatusWord
    reason: str
    # Whether release gates and readiness accept the report as current evidence.
    counts: bool = False


def max_age_days(tier: str) -> int:
    """How old a report of a service of this tier may be (settings.EVIDENCE_MAX_AGE_DAYS)."""
    limits = settings.EVIDENCE_MAX_AGE_DAYS
    return limits.get(tier, min(limits.values()))


def evidence_status(report: LoadTestReport, *, now: dt.datetime | None = None) -> EvidenceStatus:
    """("current", ""), or ("stale" | "mismatched" | "unverified", why), the reasons
    joined with "; "; `counts` says whether it is accepted as current evidence.

    A report is bound to what it measured: the revision's fingerprint, the
    hardware (GPU model and count) and its age. Reads report.revision, its
    service and runtime: fetch reports with `LoadTestReport.objects.with_context()`.
    """
    now = now or timezone.now()
    revision = report.revision
    reasons = []
    mismatch = report.mismatch
    if mismatch:
        differences = "; ".join(describe(d, revision.label) for d in mismatch["differences"])
        reasons.append(
            f"measured on a different {' and '.join(_mismatch_words(mismatch['fields']))} "
            f"({differences}); attached anyway because: {mismatch['reason']}"
        )
    limit = max_age_days(revision.service.tier)
    age = now - report.measured_at
    if age > dt.timedelta(days=limit):
        reasons.append(
            f"measured {report.measured_at:%Y-%m-%d}, {age.days} days ago; "
            f"{revision.service.tier} services accept evidence up to {limit} days old"
        )
    if report.fingerprint != revision.fingerprint:
        reasons.append(
            f"it measured fingerprint {_short(report.fingerprint)}; {revision.label} is now "
            f"{_short(revision.fingerprint)}"
        )
    runtime = revision.runtime
    measured = (report.hardware.get("gpu_model") or "", report.hardware.get("gpu_count"))
    now_runs = (runtime.gpu_model or "", runtime.gpu_count)
    if (
        normalise_gpu(measured[0]) != normalise_gpu(now_runs[0]) or measured[1] != now_runs[1]
    ) and not (mismatch and {"gpu_model", "gpu_count"} & set(mismatch["fields"])):
        reasons.append(
            f"it ran on {_hardware_label(*measured)}; {revision.label} runs on "
            f"{_hardware_label(*now_runs)}"
        )
    if mismatch:
        return EvidenceStatus("mismatched", "; ".join(reasons))
    stale = bool(reasons)
    production = revision.service.tier == Service.Tier.PRODUCTION
    if not report.model_verified:
        reasons.append(_unverified_reason(revision.label, revision.service.tier, production))
    if stale:
        return EvidenceStatus("stale", "; ".join(reasons))
    if not report.model_verified:
        return EvidenceStatus("unverified", "; ".join(reasons), counts=not production)
    return EvidenceStatus("current", "", counts=True)


def _unverified_reason(label: str, tier: str, production: bool) -> str:
    said = f"the file names no model, so nothing checked that it measured {label}"
    if production:
        return f"{said}; production services count only evidence that names its model"
    return f"{said}; {tier} services count it all the same"


def _mismatch_words(fields: list[str]) -> list[str]:
    words = {"model": "model", "engine": "engine", "gpu_model": "GPU", "gpu_count": "GPU"}
    return list(dict.fromkeys(words.get(f, f) for f in fields))


def _short(fingerprint: str) -> str:
    return fingerprint.removeprefix("sha256:")[:12]


def _hardware_label(gpu_model: str, gpu_count: int | None) -> str:
    return f"{gpu_count if gpu_count is not None else '?'} x {gpu_model or 'unnamed GPU'}"


def current_reports(
    revision: Revision, *, workload: str | None = None, now: dt.datetime | None = None
) -> list[LoadTestReport]:
    """The revision's reports that are current, newest first (one query)."""
    reports = LoadTestReport.objects.with_context().filter(revision=revision)
    if workload is not None:
        reports = reports.filter(workload=workload)
    now = now or timezone.now()
    return [r for r in reports if evidence_status(r, now=now).counts]


def has_current_report(revision: Revision, *, now: dt.datetime | None = None) -> bool:
    """Whether any of the revision's reports is current (one query): only what
    `evidence_status` reads, the revision given rather than joined (its service and
    runtime are read from it, once, if it was fetched without them)."""
    reports = LoadTestReport.objects.filter(revision=revision).only(
        "id", "revision_id", "measured_at", "fingerprint", "hardware", "mismatch", "model_verified"
    )
    now = now or timezone.now()
    for report in reports:
        report.revision = revision
        if evidence_status(report, now=now).counts:
            return True
    return False


def newest_by_workload(reports: Iterable[_Report]) -> dict[str, _Report]:
    """The newest report of each workload class, in the order of the classes."""
    newest: dict[str, _Report] = {}
    for report in reports:
        held = newest.get(report.workload)
        if held is None or (report.measured_at, report.pk) > (held.measured_at, held.pk):
            newest[report.workload] = report
    order = list(LoadTestReport.Workload.values)
    return dict(sorted(newest.items(), key=lambda item: order.index(item[0])))


def live_evidence_counts(*, now: dt.datetime | None = None) -> dict[str, int]:
    """The metrics gauge (lib.metrics.register_gauges): live revisions with no current
    load-test report, `breached` (release gates would not accept their evidence)."""
    now = now or timezone.now()
    live = list(
        Service.objects.exclude(live_revision=None).values_list("live_revision_id", flat=True)
    )
    current: set[int] = set()
    for report in LoadTestReport.objects.with_context().filter(revision_id__in=live):
        if evidence_status(report, now=now).counts:
            current.add(report.revision_id)
    return {"breached": len(set(live) - current)}
