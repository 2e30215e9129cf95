"""The read side of replay: what release gates, the incident screen and pages ask.

Plain functions over the models; none of them writes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypedDict, cast

from django.conf import settings
from django.db.models import Count, Exists, Max, OuterRef, Q, QuerySet, Subquery, Sum
from django.db.models.functions import JSONObject
from django.utils import timezone

from ledger.models import Revision, Service
from lib.querysets import built_once
from replay.models import Backend, Probe, Result, Run, Sample, SampleSet

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations


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


class SampleSetChoice(TypedDict):
    name: str
    version: int
    replayed_here: bool


def sample_set_choices(service: Service) -> list[SampleSetChoice]:
    """Every sample set by name with its latest version, those already replayed against
    a revision of `service` first: what the release form offers to pick (one query)."""
    replayed = Run.objects.filter(sample_set__name=OuterRef("name"), revision__service=service)
    rows = (
        SampleSet.objects.values("name")
        .annotate(version=Max("version"), replayed_here=Exists(replayed))
        .order_by("-replayed_here", "name")
    )
    return [
        SampleSetChoice(name=r["name"], version=r["version"], replayed_here=r["replayed_here"])
        for r in rows
    ]


def latest_verdict(sample_set_name: str, revision: Revision) -> Run | None:
    """The latest finished run of set S (any version) on revision R: what gates read.

    ``run.verdict`` is passed, failed or regressed; ``run.summary["verdict_reasons"]``
    says why. Runs that could not execute (state failed) are not verdicts.
    """
    return Run.objects.select_related("backend", "sample_set").latest_verdict(
        sample_set_name, revision
    )


def latest_verdicts(sample_set_names: Iterable[str], revision: Revision) -> dict[str, Run]:
    """`latest_verdict` of many sets at once, by set name (one query, however many sets).

    Sets with no finished run on the revision are missing from the answer.
    """
    found = latest_verdicts_of_pairs((name, revision.pk) for name in sample_set_names)
    return {name: run for (name, _), run in found.items()}


def latest_verdicts_of_pairs(pairs: Iterable[tuple[str, int]]) -> dict[tuple[str, int], Run]:
    """`latest_verdict` of many (set name, revision id) pairs, keyed by the pair: one query
    however many pairs (the gates of a list of releases).

    Pairs with no finished run are missing from the answer.
    """
    wanted = set(pairs)
    if not wanted:
        return {}
    runs = Run.objects.filter(
        revision_id__in={revision for _, revision in wanted},
        sample_set__name__in={name for name, _ in wanted},
        state=Run.State.FINISHED,
        pk=_newest_finished(sample_set__name=OuterRef("sample_set__name")),
    ).select_related("backend", "sample_set", "baseline")
    found = {(run.sample_set.name, run.revision_id): run for run in runs}
    # The filter is the cross product of names and revisions: keep the pairs asked.
    return {pair: run for pair, run in found.items() if pair in wanted}


def newest_sample_tags(sample_set_names: Iterable[str]) -> dict[str, set[str]]:
    """The tags of the samples of each named set's newest version (what a set "covers":
    a task type is covered by a set with a sample tagged with it), in one query. Names
    without a set are missing from the answer."""
    names = set(sample_set_names)
    if not names:
        return {}
    newest = SampleSet.objects.filter(name=OuterRef("sample_set__name")).order_by("-version")
    rows = Sample.objects.filter(
        sample_set__name__in=names,
        sample_set__version=Subquery(newest.values("version")[:1]),
    ).values_list("sample_set__name", "tags")
    found: dict[str, set[str]] = {}
    for name, tags in rows:
        found.setdefault(name, set()).update(
            str(tag) for tag in (tags if isinstance(tags, list) else [])
        )
    return found


def last_verification(revision: Revision) -> Run | None:
    """The latest finished rollback-target verification run on a revision ("last verified")."""
    return last_verifications([revision.pk]).get(revision.pk)


def last_verifications(revision_ids: Iterable[int]) -> dict[int, Run]:
    """`last_verification` of many revisions, by revision id: one query, none for no ids."""
    ids = set(revision_ids)
    if not ids:
        return {}
    runs = _newest_verifications().filter(revision_id__in=ids)
    return {run.revision_id: run for run in runs}


@built_once
def _newest_verifications() -> QuerySet[Run]:
    return Run.objects.filter(
        trigger=Run.Trigger.VERIFICATION,
        state=Run.State.FINISHED,
        pk=_newest_finished(trigger=Run.Trigger.VERIFICATION),
    ).select_related("backend", "sample_set")


# A verification run not finished yet: waiting for a worker, replaying, or interrupted
# and queued again to resume.
PENDING_STATES = (Run.State.QUEUED, Run.State.RUNNING, Run.State.INTERRUPTED)


def pending_verification(revision: Revision) -> Run | None:
    """The newest verification run of the revision not finished yet (one query)."""
    return (
        Run.objects.filter(
            revision=revision, trigger=Run.Trigger.VERIFICATION, state__in=PENDING_STATES
        )
        .order_by("-created_at", "-pk")
        .first()
    )


class VerificationMeans(TypedDict):
    """What verifying a revision now would use, and what is under way."""

    backend: str | None  # the enabled backend a verification replays against; None: none
    pending_run: int | None  # a verification run not finished yet
    pending_state: str | None


def verification_means(revision: Revision) -> VerificationMeans:
    """Whether an enabled backend serves the revision (the one `verification_backend`
    picks) and which verification of it is under way (one query)."""
    means = _verification_means().filter(pk=revision.pk)
    row = means.values("backend", "pending").first()  # type: ignore[misc]  # annotations
    pending = (row or {}).get("pending") or {}
    return VerificationMeans(
        backend=(row or {}).get("backend"),
        pending_run=pending.get("id"),
        pending_state=pending.get("state"),
    )


@built_once
def _verification_means() -> QuerySet[Revision]:
    backends = Backend.objects.filter(revision=OuterRef("pk"), enabled=True).order_by("name")
    pending = Run.objects.filter(
        revision=OuterRef("pk"), trigger=Run.Trigger.VERIFICATION, state__in=PENDING_STATES
    ).order_by("-created_at", "-pk")
    return Revision.objects.annotate(
        backend=Subquery(backends.values("name")[:1]),
        pending=Subquery(pending.values(row=JSONObject(id="pk", state="state"))[:1]),
    )


def _newest_finished(**alike: Any) -> Subquery:
    """The id of the newest finished run on the outer run's revision that is `alike` it:
    a correlated subquery along the "latest verdict" index, cheaper to build than a
    window over every run of the revisions."""
    return Subquery(
        Run.objects.filter(revision_id=OuterRef("revision_id"), state=Run.State.FINISHED, **alike)
        .order_by("-finished_at", "-pk")
        .values("pk")[:1]
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
                # An errored run reached no backend: it has no pass rate to plot.
                pass_rate=None if run.verdict == Run.Verdict.ERRORED else summary.get("pass_rate"),
                ttft_p50_ms=ttft.get("p50"),
                ttft_p95_ms=ttft.get("p95"),
                tpot_p50_ms=tpot.get("p50"),
                tpot_p95_ms=tpot.get("p95"),
            )
        )
    return points


def trend_has_measurements(points: list[TrendPoint]) -> bool:
    """Whether a trend chart would draw anything (runs that reached nothing draw no axes)."""
    return any(
        value is not None
        for point in points
        for value in (
            point["pass_rate"],
            point["ttft_p50_ms"],
            point["ttft_p95_ms"],
            point["tpot_p50_ms"],
            point["tpot_p95_ms"],
        )
    )


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


# ---------------------------------------------------------------- is the live revision healthy


HealthWord = Literal[
    "healthy", "unreachable", "errored", "drift", "regressed", "stale", "not monitored"
]
# Worst first: the headline is the first word that applies.
_SEVERITY: tuple[HealthWord, ...] = (
    "unreachable",
    "errored",
    "drift",
    "regressed",
    "stale",
    "not monitored",
    "healthy",
)


class HealthReason(TypedDict):
    word: HealthWord
    backend: str
    at: dt.datetime | None
    text: str


class Health(TypedDict):
    word: HealthWord
    reasons: list[HealthReason]
    # The newest probe or run the verdict rests on.
    checked_at: dt.datetime | None


def expected_check_interval() -> dt.timedelta:
    """How old the newest probe or run of a live backend may be before the verdict is stale:
    two probe sweeps, so one late sweep is not an alarm."""
    return dt.timedelta(minutes=2 * settings.REPLAY_PROBE_EVERY_MINUTES)


class _LatestIds(TypedDict):
    latest_probe: int | None
    latest_reachable: int | None
    latest_run: int | None


_BackendWithLatest: TypeAlias = "WithAnnotations[Backend, _LatestIds]"


def live_health(service: Service, *, now: dt.datetime | None = None) -> Health:
    """What replay knows about the live revision, in one honest word and its reasons.

    *healthy* only when a backend serving the live revision was probed or replayed
    within the expected interval and nothing is wrong; *unreachable* (its latest
    probe could not reach it), *errored* (its latest run could not reach it),
    *drift* (its latest reachable probe found something other than the registry
    says), *regressed* (its latest finished run regressed), *stale* (nothing
    within the interval) or *not monitored* (no backend serves the live revision).
    Two queries: the enabled backends of the live revision with the ids of their
    latest probe, latest reachable probe and latest finished run; then those rows.
    """
    now = now or timezone.now()
    if service.live_revision_id is None:
        return Health(
            word="not monitored",
            reasons=[
                HealthReason(word="not monitored", backend="", at=None, text="no revision is live")
            ],
            checked_at=None,
        )
    backends = cast(
        "list[_BackendWithLatest]",
        list(_backends_with_latest().filter(revision_id=service.live_revision_id, enabled=True)),
    )
    if not backends:
        return Health(
            word="not monitored",
            reasons=[
                HealthReason(
                    word="not monitored",
                    backend="",
                    at=None,
                    text="no enabled backend serves the live revision, so nothing probes or "
                    "replays it",
                )
            ],
            checked_at=None,
        )
    probe_ids = {b.latest_probe for b in backends} | {b.latest_reachable for b in backends}
    found: dict[Any, Any] = {
        **{("probe", p.pk): p for p in Probe.objects.filter(pk__in=probe_ids - {None})},
    }
    run_ids = {b.latest_run for b in backends} - {None}
    found.update(
        {("run", r.pk): r for r in Run.objects.filter(pk__in=run_ids).select_related("sample_set")}
    )
    reasons: list[HealthReason] = []
    newest: dt.datetime | None = None
    for backend in backends:
        probe = found.get(("probe", backend.latest_probe))
        reachable = found.get(("probe", backend.latest_reachable))
        run = found.get(("run", backend.latest_run))
        for when in (probe and probe.started_at, run and run.finished_at):
            if when and (newest is None or when > newest):
                newest = when
        reasons.extend(_backend_reasons(backend.name, probe, reachable, run, now))
    if not reasons:
        reasons.append(
            HealthReason(
                word="healthy",
                backend=backends[0].name,
                at=newest,
                text="probed and replayed recently, matching the registry",
            )
        )
    word = min((r["word"] for r in reasons), key=_SEVERITY.index)
    reasons.sort(key=lambda r: _SEVERITY.index(r["word"]))
    return Health(word=word, reasons=reasons, checked_at=newest)


@built_once
def _backends_with_latest() -> QuerySet[Backend]:
    """Backends with the ids of their latest probe, latest reachable probe and latest
    finished run."""
    probes = Probe.objects.filter(backend=OuterRef("pk")).order_by("-started_at")
    runs = Run.objects.filter(backend=OuterRef("pk"), state=Run.State.FINISHED).order_by(
        "-finished_at"
    )
    return Backend.objects.annotate(
        latest_probe=Subquery(probes.values("pk")[:1]),
        latest_reachable=Subquery(probes.filter(reachable=True).values("pk")[:1]),
        latest_run=Subquery(runs.values("pk")[:1]),
    ).order_by("name")


def _backend_reasons(
    name: str, probe: Probe | None, reachable: Probe | None, run: Run | None, now: dt.datetime
) -> list[HealthReason]:
    reasons: list[HealthReason] = []
    if probe is not None and not probe.reachable:
        reasons.append(
            HealthReason(
                word="unreachable",
                backend=name,
                at=probe.started_at,
                text=f"the latest probe could not reach it: {probe.error or 'no answer'}",
            )
        )
    if run is not None and run.verdict == Run.Verdict.ERRORED:
        reasons.append(
            HealthReason(
                word="errored",
                backend=name,
                at=run.finished_at,
                text=f"the latest replay (run {run.pk}) could not reach it: "
                + "; ".join((run.summary or {}).get("verdict_reasons") or ["no answer"]),
            )
        )
    if reachable is not None and reachable.drift and reachable == probe:
        reasons.append(
            HealthReason(
                word="drift",
                backend=name,
                at=reachable.started_at,
                text="it serves something else than the registry says: "
                + "; ".join(
                    f"{item['what']} registered {item['registered']}, reported {item['reported']}"
                    for item in reachable.drift
                ),
            )
        )
    if run is not None and run.verdict == Run.Verdict.REGRESSED:
        reasons.append(
            HealthReason(
                word="regressed",
                backend=name,
                at=run.finished_at,
                text=f"the latest replay (run {run.pk}, {run.sample_set}) "
                "regressed against its baseline",
            )
        )
    checked = [when for when in (probe and probe.started_at, run and run.finished_at) if when]
    if not checked:
        reasons.append(
            HealthReason(word="stale", backend=name, at=None, text="never probed or replayed")
        )
    elif now - max(checked) > expected_check_interval():
        reasons.append(
            HealthReason(
                word="stale",
                backend=name,
                at=max(checked),
                text=f"not probed or replayed for {_ago(now - max(checked))}; "
                f"expected every {_ago(expected_check_interval())}",
            )
        )
    return reasons


def _ago(delta: dt.timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    if minutes < 120:
        return f"{minutes} min"
    hours = minutes // 60
    return f"{hours} h" if hours < 48 else f"{hours // 24} days"


# ---------------------------------------------------------------- one run, as its page reads it


ACTIVE_STATES = (Run.State.QUEUED, Run.State.RUNNING)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _percentile(summary: dict[str, Any], metric: str, pct: str) -> float | None:
    """`summary[metric][pct]` as the aggregates store it, or a flat `metric_pct` key."""
    nested = summary.get(f"{metric}_ms") or summary.get(metric)
    if isinstance(nested, dict):
        return _number(nested.get(pct))
    return _number(summary.get(f"{metric}_{pct}") or summary.get(f"{metric}_{pct}_ms"))


def summary_numbers(summary: Any) -> dict[str, Any]:
    """What the run page shows of `Run.summary` (see `replay.services.verdicts.RunSummary`),
    tolerant of summaries written by older versions."""
    summary = summary if isinstance(summary, dict) else {}
    codes = summary.get("error_codes")
    reasons = summary.get("verdict_reasons")
    return {
        "pass_rate": _number(summary.get("pass_rate")),
        "attempts": _number(summary.get("attempts")),
        "samples_ok": summary.get("samples_ok"),
        "samples": summary.get("samples"),
        "ttft_p50": _percentile(summary, "ttft", "p50"),
        "ttft_p95": _percentile(summary, "ttft", "p95"),
        "tpot_p50": _percentile(summary, "tpot", "p50"),
        "tpot_p95": _percentile(summary, "tpot", "p95"),
        "error_codes": sorted(codes.items()) if isinstance(codes, dict) else [],
        "reasons": [r for r in reasons if isinstance(r, str)] if isinstance(reasons, list) else [],
        "error": summary.get("error") if isinstance(summary.get("error"), str) else "",
        "modes": _modes(summary),
    }


def _modes(summary: dict[str, Any]) -> list[tuple[str, Any, int]]:
    """(mode, label, samples) of the summary: re-run, model turn only, skipped; [] for a
    summary written before model turns were counted."""
    counts: dict[str, Any] = {
        Result.Mode.RERUN: summary.get("rerun"),
        Result.Mode.MODEL_TURN: summary.get("model_turn"),
        Result.Mode.SKIPPED: summary.get("skipped"),
    }
    if not all(isinstance(count, int) for count in counts.values()):
        return []
    return [(mode, label, counts[mode]) for mode, label in Result.Mode.choices]


def run_progress(run: Run, done: int | None = None) -> dict[str, Any]:
    """How far the run is: results written (`done`, if counted already) of the attempts
    the set asks for."""
    expected = (
        Sample.objects.filter(sample_set=run.sample_set_id).aggregate(n=Sum("repeat"))["n"] or 0
    )
    if done is None:
        done = run.results.count()
    return {
        "done": done,
        "expected": expected,
        "percent": round(100 * done / expected) if expected else 0,
        "active": run.state in ACTIVE_STATES,
    }


class ComparisonRow(TypedDict):
    metric: str
    unit: Literal["rate", "ms"]  # the `replay_format` filters read it
    a: float | None
    b: float | None
    delta: float | None
    change_pct: float | None
    regressed: bool


def comparison_table(comparison: Any) -> dict[str, Any] | None:
    """`services.compare_runs` output (also what `Run.comparison` stores) as rows of pass
    rate and latency percentiles with A, B and B's change; each row says whether the
    domain counted it as a regression."""
    if not isinstance(comparison, dict) or "pass_rate" not in comparison:
        return None
    regressions = [r for r in comparison.get("regressions") or [] if isinstance(r, dict)]
    kinds = {r.get("kind") for r in regressions}
    rate = comparison["pass_rate"]
    rows = [
        ComparisonRow(
            metric="Pass rate",
            unit="rate",
            a=_number(rate.get("a")),
            b=_number(rate.get("b")),
            delta=_number(rate.get("delta")),
            change_pct=None,
            regressed="pass_rate" in kinds,
        )
    ]
    for key, name in (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT")):
        for pct in ("p50", "p95"):
            delta = (comparison.get(key) or {}).get(pct) or {}
            rows.append(
                ComparisonRow(
                    metric=f"{pct} {name}",
                    unit="ms",
                    a=_number(delta.get("a")),
                    b=_number(delta.get("b")),
                    delta=_number(delta.get("delta")),
                    change_pct=_number(delta.get("change_pct")),
                    regressed=f"{key.removesuffix('_ms')}_{pct}" in kinds,
                )
            )
    codes = comparison.get("error_codes") or {}
    return {
        "rows": rows,
        "regressions": [r.get("detail", "") for r in regressions],
        "new_codes": codes.get("new") or [],
        "gone_codes": codes.get("gone") or [],
        "changed_samples": [s for s in comparison.get("samples") or [] if s.get("changed")],
        "same_model_asset": comparison.get("same_model_asset"),
        "same_fingerprint": comparison.get("same_fingerprint"),
        "tolerances": comparison.get("tolerances") or {},
    }


def run_work_counts(*, now: dt.datetime | None = None) -> dict[str, int]:
    """The metrics gauge (lib.metrics.register_gauges), in one query: runs not yet
    ended (`open`), and of those the ones whose worker stopped beating or that wait to
    be resumed (`overdue`: the reaper's business)."""
    now = now or timezone.now()
    stale = now - dt.timedelta(seconds=settings.REPLAY_STALE_AFTER_SECONDS)
    not_ended = [Run.State.QUEUED, Run.State.RUNNING, Run.State.INTERRUPTED]
    counts = Run.objects.aggregate(
        open=Count("pk", filter=Q(state__in=not_ended)),
        overdue=Count(
            "pk",
            filter=Q(state=Run.State.INTERRUPTED)
            | Q(state=Run.State.RUNNING, heartbeat_at__lt=stale),
        ),
    )
    return {"open": counts["open"], "overdue": counts["overdue"]}
