"""The read side of replay: what release gates, the incident screen and pages ask.

Plain functions over the models; none of them writes.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, TypedDict

from django.db.models import OuterRef, Subquery

from ledger.models import Revision, Service
from replay.models import Backend, Probe, Run


class TrendPoint(TypedDict):
    run: int
    sample_set: str
    finished_at: dt.datetime
    verdict: str
    pass_rate: float | None
    ttft_p50_ms: float | None
    ttft_p95_ms: float | None
    tpot_p50_ms: float | None
    tpot_p95_ms: float | None


class DriftFlag(TypedDict):
    backend: str
    backend_id: int
    revision_id: int
    revision: str
    live: bool
    probe: int
    probed_at: dt.datetime
    drift: list[dict[str, Any]]


def latest_verdict(sample_set_name: str, revision: Revision) -> Run | None:
    """The latest finished run of set S (any version) on revision R: what gates read.

    ``run.verdict`` is passed, failed or regressed; ``run.summary["verdict_reasons"]``
    says why. Runs that could not execute (state failed) are not verdicts.
    """
    return Run.objects.select_related("backend", "sample_set").latest_verdict(
        sample_set_name, revision
    )


def last_verification(revision: Revision) -> Run | None:
    """The latest finished rollback-target verification run on a revision ("last verified")."""
    return (
        Run.objects.filter(
            revision=revision, trigger=Run.Trigger.VERIFICATION, state=Run.State.FINISHED
        )
        .select_related("backend", "sample_set")
        .order_by("-finished_at")
        .first()
    )


def backend_trend(backend: Backend, limit: int = 30) -> list[TrendPoint]:
    """The backend's last ``limit`` finished runs, oldest first, for the trend charts."""
    runs = (
        Run.objects.filter(backend=backend, state=Run.State.FINISHED)
        .select_related("sample_set")
        .order_by("-finished_at")[:limit]
    )
    points = []
    for run in reversed(list(runs)):
        summary = run.summary or {}
        ttft, tpot = summary.get("ttft_ms") or {}, summary.get("tpot_ms") or {}
        points.append(
            TrendPoint(
                run=run.pk,
                sample_set=str(run.sample_set),
                finished_at=run.finished_at,
                verdict=run.verdict,
                pass_rate=summary.get("pass_rate"),
                ttft_p50_ms=ttft.get("p50"),
                ttft_p95_ms=ttft.get("p95"),
                tpot_p50_ms=tpot.get("p50"),
                tpot_p95_ms=tpot.get("p95"),
            )
        )
    return points


def latest_probe(backend: Backend) -> Probe | None:
    return Probe.objects.filter(backend=backend).order_by("-started_at").first()


def drift_flags(service: Service) -> list[DriftFlag]:
    """Backends serving any revision of the service whose latest probe found drift.

    Two queries: the backends with the id of their latest reachable probe, then
    those probes.
    """
    latest = (
        Probe.objects.filter(backend=OuterRef("pk"), reachable=True)
        .order_by("-started_at")
        .values("pk")[:1]
    )
    backends = list(
        Backend.objects.filter(revision__service=service)
        .select_related("revision")
        .annotate(latest_probe=Subquery(latest))
        .order_by("name")
    )
    probes = Probe.objects.in_bulk([b.latest_probe for b in backends if b.latest_probe])
    flags = []
    for backend in backends:
        probe = probes.get(backend.latest_probe)
        if probe is None or not probe.drift:
            continue
        flags.append(
            DriftFlag(
                backend=backend.name,
                backend_id=backend.pk,
                revision_id=backend.revision_id,
                revision=backend.revision.label,
                live=backend.revision_id == service.live_revision_id,
                probe=probe.pk,
                probed_at=probe.started_at,
                drift=probe.drift,
            )
        )
    return flags


def regressions(service: Service, limit: int = 10) -> list[Run]:
    """The service's latest regressed runs (service page, incident screen)."""
    return list(
        Run.objects.filter(revision__service=service, verdict=Run.Verdict.REGRESSED)
        .select_related("backend", "sample_set", "revision", "baseline")
        .order_by("-finished_at")[:limit]
    )
