"""Gates on what the candidate is and how it measured: license, provenance, image,
load-test evidence, metrics, replay and its failed samples."""

from __future__ import annotations

from django.urls import reverse

from ledger import queries as ledger_queries
from ledger.models import Capability
from releases import policy
from releases.governance.gates.base import (
    EvidenceRef,
    Inputs,
    Verdict,
    cite,
    listing,
    report_ref,
    run_ref,
)
from releases.schemas import CLASSIFICATIONS, METRICS
from replay.models import Run


def license(inputs: Inputs) -> Verdict:
    release = inputs.release
    revision = release.to_revision
    asset = revision.model_asset
    findings = ledger_queries.license_findings(
        release.service, revision, accepted=inputs.license_accepted
    )
    breaches = [f for f in findings if f.severity == "breach"]
    ref = cite(
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


def provenance(inputs: Inputs) -> Verdict:
    asset = inputs.release.to_revision.model_asset
    ref = cite(
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
    problems = [f"{asset} has no {listing(missing)}"] if missing else []
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


def image_pinned(inputs: Inputs) -> Verdict:
    runtime = inputs.release.to_revision.runtime
    ref = cite(
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


def load_evidence(inputs: Inputs) -> Verdict:
    release = inputs.release
    service = release.service
    statuses = [(r, ledger_queries.evidence_status(r, now=inputs.now)) for r in inputs.reports]
    current = [r for r, s in statuses if s.counts]
    newest = ledger_queries.newest_by_workload(current)
    inputs.evidence_used = newest
    # Why the newest report of a workload class that does not count is refused.
    refused = {}
    for report, status in sorted(statuses, key=lambda p: (p[0].measured_at, p[0].pk)):
        if status.status in ("stale", "unverified") and not status.counts:
            refused[report.workload] = (report, status)
    needed_by = policy.required_workloads(inputs.tier, inputs.served_task_types)
    required = tuple(needed_by)
    # Which SLOs, read from which column and compared which way: the SLO matrix's table.
    slos = [c for c in ledger_queries.SLO_CHECKS if c.target_of(service) is not None]
    # An SLO no report can measure is named once, not held against every report.
    unjudged = [c for c in slos if c.column is None]
    slos = [c for c in slos if c.column is not None]
    problems: list[str] = []
    refs: list[EvidenceRef] = []
    if required and not slos:
        problems.append(f"{service.slug} has no SLO to judge the evidence against: set its SLOs")
    for workload in required:
        found = newest.get(workload)
        if found is None:
            held = refused.get(workload)
            if held:
                report, status = held
                problems.append(
                    f"the only {workload} report (#{report.pk}){_for(needed_by[workload])} "
                    f"is {status.status}: {status.reason}"
                )
                refs.append(report_ref(report))
            else:
                problems.append(
                    f"no current load-test report for {workload}{_for(needed_by[workload])}"
                )
            continue
        report = found
        refs.append(report_ref(report))
        if workload in policy.PEAKS_REQUIRED[inputs.tier] and not ledger_queries.has_peaks(report):
            problems.append(
                f"the {workload} report #{report.pk} has no GPU-memory and KV-cache peaks: "
                f"{inputs.tier} needs both (upload the engine's /metrics scraped before and "
                "after the test with the report)"
            )
        for check in slos:
            value = check.measured(report)
            bound = check.target_of(service)
            assert bound is not None
            if value is None:
                problems.append(
                    f"{check.label} under {workload} not measured — report #{report.pk}"
                )
            elif not check.attained(value, bound):
                problems.append(
                    f"{check.label} {value:.4g} {check.unit} under {workload} {check.missed} "
                    f"the service SLO of {bound:g} {check.unit} — report #{report.pk}"
                )
    aside = "".join(
        f" The {check.label} SLO is not judged: {check.unmeasured}."
        for check in unjudged
        if required
    )
    if problems:
        return "fail", "; ".join(problems) + "." + aside, refs
    if not required:
        return "pass", f"{inputs.tier} services need no load-test evidence.", refs
    return (
        "pass",
        f"current reports for {', '.join(required)} are within the service SLOs.{aside}",
        refs,
    )


def _for(task_types: tuple[str, ...]) -> str:
    """Which task types need a workload class, when the tier alone does not."""
    if not task_types:
        return ""
    return f" (needed by task type{'s' if len(task_types) > 1 else ''} {', '.join(task_types)})"


def metrics_coverage(inputs: Inputs) -> Verdict:
    required = policy.REQUIRED_METRICS[inputs.tier]
    declared = set(inputs.release.metrics_declared)
    missing = [METRICS[m].lower() for m in required if m not in declared]
    if missing:
        return "fail", f"metrics not declared: {listing(missing, 7)}.", []
    if not required:
        return "pass", f"{inputs.tier} releases need no metrics.", []
    candidate = inputs.release.to_revision
    probed = inputs.metrics_capability
    if probed is None:
        return (
            "fail",
            f"declared, but {candidate.label} declares no metrics capability (its engine's "
            "series names) for a probe to look for on its /metrics: declare it, then probe a "
            "backend of it.",
            [],
        )
    ref = cite("capability", probed.pk, f"{candidate.label} metrics")
    if probed.status != Capability.Status.VERIFIED or (
        probed.verified_fingerprint != candidate.fingerprint
    ):
        evidence = probed.evidence if isinstance(probed.evidence, dict) else {}
        if probed.status == Capability.Status.FAILED:
            absent = evidence.get("missing") or []
            said = "its last probe failed" + (f" (missing {', '.join(absent)})" if absent else "")
        elif probed.status == Capability.Status.DECLARED:
            said = "no probe has looked yet"
        else:
            said = "it was verified on another fingerprint"
        return (
            "fail",
            f"declared, but not seen on {candidate.label}'s /metrics: {said}. Probe a backend "
            f"of {candidate.label}.",
            [ref],
        )
    covers = set(probed.evidence.get("covers", []) if isinstance(probed.evidence, dict) else [])
    unseen = [
        METRICS[m].lower()
        for m in required
        if m not in covers and m not in policy.METRICS_NOT_ON_ENGINE
    ]
    if unseen:
        return (
            "fail",
            f"declared, but the probe of {candidate.label}'s /metrics found no series for "
            f"{listing(unseen, 7)}.",
            [ref],
        )
    return (
        "pass",
        f"{len(required)} required metrics declared and seen on {candidate.label}'s /metrics"
        + (
            " (GPU memory from DCGM, beside the engine)."
            if "gpu_memory" in required and "gpu_memory" not in covers
            else "."
        ),
        [ref],
    )


def replay(inputs: Inputs) -> Verdict:
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
        refs.append(run_ref(run))
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
    return "pass", f"{listing(names)} passed on {candidate.label}{against}.", refs


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


def failures_classified(inputs: Inputs) -> Verdict:
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
    refs = [run_ref(inputs.runs[n]) for n in dict.fromkeys(n for n, _ in failed)]
    problems = []
    if unclassified:
        problems.append(
            f"{len(unclassified)} failed sample{'s' if len(unclassified) > 1 else ''} "
            f"not classified: {listing(unclassified)}"
        )
    if blocking:
        problems.append(f"classified as blocking the release: {listing(blocking)}")
    if vague:
        problems.append(f"handled by degradation, but which is not said: {listing(vague)}")
    if problems:
        return "fail", "; ".join(problems) + ".", refs
    if not failed:
        return "pass", "no sample failed on the candidate.", refs
    summary = ", ".join(f"{n} {CLASSIFICATIONS[k].lower()}" for k, n in sorted(counts.items()))
    return "pass", f"{len(failed)} failed samples classified: {summary}.", refs
