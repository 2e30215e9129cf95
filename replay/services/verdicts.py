"""A finished run's summary, its baseline, the comparison with it, and the verdict.

Outputs are not deterministic, so a sample's outcome is a pass rate over its repeats
judged against its flakiness budget (``Sample.min_pass_rate``), and runs are
compared by pass rate and latency percentiles, never by single outcomes.

A run **regressed** against its baseline when its pass rate fell by more than
``REPLAY_PASS_RATE_TOLERANCE_PCT`` points, when its p95 TTFT or p95 TPOT rose by more
than ``REPLAY_LATENCY_TOLERANCE_PCT`` percent (and by at least
``REPLAY_LATENCY_FLOOR_MS``, so that 2 ms becoming 3 ms is not news), or when an
error code appears that the baseline never saw (``check_failed`` is left to the
pass rate, or one flaky answer within budget would count as a regression). It
**failed** when a sample's pass rate is below its budget; otherwise it **passed**.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from django.conf import settings

from replay import stats
from replay.checks import pass_rate
from replay.models import Result, Run

_LATENCY = ("ttft_ms", "tpot_ms", "e2e_ms")


class SampleSummary(TypedDict):
    category: str
    mode: str  # Result.Mode: re-run, model turn only, skipped
    attempts: int
    passed: int
    rate: float | None
    min_pass_rate: float
    ok: bool | None  # None: skipped (not re-runnable)
    error_codes: dict[str, int]


class RunSummary(TypedDict):
    samples: int
    rerun: int
    model_turn: int
    skipped: int
    attempts: int
    passed: int
    failed: int
    errors: int
    pass_rate: float | None
    samples_ok: int
    samples_below_budget: list[str]
    per_sample: dict[str, SampleSummary]
    error_codes: dict[str, int]
    ttft_ms: stats.Summary
    tpot_ms: stats.Summary
    e2e_ms: stats.Summary
    output_tokens: int
    verdict_reasons: list[str]


def summarize_run(run: Run) -> RunSummary:
    """Counts, per-sample pass rates against their budgets, latency percentiles."""
    samples = {s.pk: s for s in run.sample_set.samples.all()}
    rows = list(
        run.results.values(
            "sample_id",
            "outcome",
            "mode",
            "error_code",
            "ttft_ms",
            "tpot_ms",
            "e2e_ms",
            "output_tokens",
        )
    )
    by_sample: dict[int, list[Mapping[str, Any]]] = defaultdict(list)
    for row in rows:
        by_sample[row["sample_id"]].append(row)
    per_sample: dict[str, SampleSummary] = {}
    below: list[str] = []
    for sample in sorted(samples.values(), key=lambda s: s.key):
        results = by_sample.get(sample.pk, [])
        sent = [r for r in results if r["outcome"] != Result.Outcome.SKIPPED]
        codes = Counter(r["error_code"] for r in sent if r["error_code"])
        mode = results[0]["mode"] if results else sample.replay_mode
        if not sent:
            per_sample[sample.key] = SampleSummary(
                category=sample.category,
                mode=mode,
                attempts=0,
                passed=0,
                rate=None,
                min_pass_rate=sample.min_pass_rate,
                ok=None,
                error_codes={},
            )
            continue
        rate = pass_rate(
            [r["outcome"] == Result.Outcome.PASSED for r in sent],
            min_pass_rate=sample.min_pass_rate,
        )
        per_sample[sample.key] = SampleSummary(
            category=sample.category,
            mode=mode,
            attempts=rate.attempts,
            passed=rate.passed,
            rate=round(rate.rate, 4),
            min_pass_rate=sample.min_pass_rate,
            ok=rate.ok,
            error_codes=dict(sorted(codes.items())),
        )
        if not rate.ok:
            below.append(sample.key)
    sent = [r for r in rows if r["outcome"] != Result.Outcome.SKIPPED]
    # Latency of every complete answer, whether or not its checks held.
    complete = [r for r in sent if r["error_code"] in ("", "check_failed")]
    passed = sum(1 for r in sent if r["outcome"] == Result.Outcome.PASSED)
    return RunSummary(
        samples=len(samples),
        rerun=sum(1 for s in per_sample.values() if s["mode"] == Result.Mode.RERUN),
        model_turn=sum(1 for s in per_sample.values() if s["mode"] == Result.Mode.MODEL_TURN),
        skipped=sum(1 for s in per_sample.values() if s["ok"] is None),
        attempts=len(sent),
        passed=passed,
        failed=sum(1 for r in sent if r["outcome"] == Result.Outcome.FAILED),
        errors=sum(1 for r in sent if r["outcome"] == Result.Outcome.ERROR),
        pass_rate=round(passed / len(sent), 4) if sent else None,
        samples_ok=sum(1 for s in per_sample.values() if s["ok"]),
        samples_below_budget=below,
        per_sample=per_sample,
        error_codes=dict(sorted(Counter(r["error_code"] for r in sent if r["error_code"]).items())),
        ttft_ms=_summary(complete, "ttft_ms"),
        tpot_ms=_summary(complete, "tpot_ms"),
        e2e_ms=_summary(complete, "e2e_ms"),
        output_tokens=sum(r["output_tokens"] or 0 for r in complete),
        verdict_reasons=[],
    )


def _summary(rows: Sequence[Mapping[str, Any]], name: str) -> stats.Summary:
    summary = stats.summarize(r[name] for r in rows if r[name] is not None)
    return {
        key: round(value, 3) if isinstance(value, float) else value
        for key, value in summary.items()
    }  # type: ignore[return-value]


# -- baseline ---------------------------------------------------------------------------


def choose_baseline(run: Run) -> Run | None:
    """The latest passing finished run of the same set on the service's live revision;
    failing that, the latest passing run of the same set on the same backend."""
    candidates = (
        Run.objects.filter(
            state=Run.State.FINISHED,
            verdict=Run.Verdict.PASSED,
            sample_set__name=run.sample_set.name,
        )
        .exclude(pk=run.pk)
        .select_related("backend", "revision__service", "sample_set")
        .order_by("-finished_at")
    )
    live = run.revision.service.live_revision_id
    if live is not None:
        baseline = candidates.filter(revision_id=live).first()
        if baseline is not None:
            return baseline
    return candidates.filter(backend_id=run.backend_id).first()


# -- comparison -------------------------------------------------------------------------


def _tolerances() -> dict[str, float]:
    return {
        "pass_rate_points": settings.REPLAY_PASS_RATE_TOLERANCE_PCT,
        "latency_pct": settings.REPLAY_LATENCY_TOLERANCE_PCT,
        "latency_floor_ms": settings.REPLAY_LATENCY_FLOOR_MS,
    }


def _side(run: Run) -> dict[str, Any]:
    return {
        "run": run.pk,
        "backend": run.backend.name,
        "engine": run.backend.engine,
        "revision": run.revision_id,
        "revision_label": str(run.revision),
        "model_asset": run.revision.model_asset_id,
        "fingerprint": run.fingerprint,
        "sample_set": str(run.sample_set),
        "concurrency": run.concurrency,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
    }


def _delta(a: float | None, b: float | None) -> dict[str, Any]:
    delta = None if a is None or b is None else round(b - a, 3)
    change = None if delta is None or not a else round(delta / a * 100, 1)
    return {"a": a, "b": b, "delta": delta, "change_pct": change}


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f} ms" if value >= 10 else f"{value:.1f} ms"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.1f}%"


def regressions(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, str]]:
    """What got worse from summary ``a`` to summary ``b``, beyond the tolerances."""
    tolerance = _tolerances()
    found: list[dict[str, str]] = []
    rate_a, rate_b = a.get("pass_rate"), b.get("pass_rate")
    if rate_a is not None and rate_b is not None:
        drop = (rate_a - rate_b) * 100
        if drop > tolerance["pass_rate_points"] + 1e-9:
            found.append(
                {
                    "kind": "pass_rate",
                    "detail": f"pass rate fell from {_pct(rate_a)} to {_pct(rate_b)} "
                    f"(tolerance {tolerance['pass_rate_points']:g} points)",
                }
            )
    for name, label in (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT")):
        before = (a.get(name) or {}).get("p95")
        after = (b.get(name) or {}).get("p95")
        if before is None or after is None:
            continue
        limit = before * (1 + tolerance["latency_pct"] / 100)
        if after > limit and after - before >= tolerance["latency_floor_ms"]:
            change = (after - before) / before * 100 if before else float("inf")
            found.append(
                {
                    "kind": f"{name.removesuffix('_ms')}_p95",
                    "detail": f"p95 {label} rose from {_ms(before)} to {_ms(after)} "
                    f"(+{change:.0f}%, tolerance {tolerance['latency_pct']:g}%)",
                }
            )
    new_codes = sorted(
        set(b.get("error_codes") or {}) - set(a.get("error_codes") or {}) - {"check_failed"}
    )
    if new_codes:
        counts = b["error_codes"]
        found.append(
            {
                "kind": "new_error_codes",
                "detail": "new error codes: "
                + ", ".join(f"{code} ({counts[code]})" for code in new_codes),
            }
        )
    return found


def compare_runs(run_a: Run, run_b: Run) -> dict[str, Any]:
    """How run b differs from run a: pass rates, latency percentiles, error codes, samples.

    Used against a run's baseline (a is the baseline) and for engine parity: the
    same set replayed against two backends serving the same model asset.
    """
    a, b = run_a.summary or {}, run_b.summary or {}
    per_a, per_b = a.get("per_sample") or {}, b.get("per_sample") or {}
    samples = []
    for key in sorted(set(per_a) | set(per_b)):
        sa, sb = per_a.get(key) or {}, per_b.get(key) or {}
        samples.append(
            {
                "key": key,
                "a_rate": sa.get("rate"),
                "b_rate": sb.get("rate"),
                "a_ok": sa.get("ok"),
                "b_ok": sb.get("ok"),
                "changed": sa.get("ok") != sb.get("ok"),
            }
        )
    codes_a, codes_b = a.get("error_codes") or {}, b.get("error_codes") or {}
    return {
        "a": _side(run_a),
        "b": _side(run_b),
        "same_model_asset": run_a.revision.model_asset_id == run_b.revision.model_asset_id,
        "same_fingerprint": run_a.fingerprint == run_b.fingerprint,
        "same_sample_set": run_a.sample_set_id == run_b.sample_set_id,
        "pass_rate": _delta(a.get("pass_rate"), b.get("pass_rate")),
        "ttft_ms": {
            p: _delta((a.get("ttft_ms") or {}).get(p), (b.get("ttft_ms") or {}).get(p))
            for p in ("p50", "p95")
        },
        "tpot_ms": {
            p: _delta((a.get("tpot_ms") or {}).get(p), (b.get("tpot_ms") or {}).get(p))
            for p in ("p50", "p95")
        },
        "error_codes": {
            "a": codes_a,
            "b": codes_b,
            "new": sorted(set(codes_b) - set(codes_a)),
            "gone": sorted(set(codes_a) - set(codes_b)),
        },
        "samples": samples,
        "tolerances": _tolerances(),
        "regressions": regressions(a, b),
    }


# Error codes that mean the request never reached a server that answered.
UNREACHABLE_CODES = frozenset({"connect_error"})


def decide(summary: RunSummary, comparison: dict[str, Any]) -> tuple[str, list[str]]:
    """The verdict and its reasons: errored (nothing reached the backend) beats regressed
    beats failed beats passed. An errored run says nothing about the model, so it is
    neither a regression nor a failure of a sample, and never a baseline."""
    codes = summary["error_codes"]
    if (
        summary["attempts"]
        and summary["errors"] == summary["attempts"]
        and set(codes) <= UNREACHABLE_CODES
    ):
        count = sum(codes.values())
        return Run.Verdict.ERRORED, [
            f"the backend could not be reached: {count} of {summary['attempts']} attempts "
            f"ended in {', '.join(sorted(codes))}"
        ]
    found = comparison.get("regressions") or []
    failures = []
    for key in summary["samples_below_budget"]:
        sample = summary["per_sample"][key]
        failures.append(
            f"{key}: {sample['passed']}/{sample['attempts']} attempts passed, below its "
            f"minimum pass rate of {sample['min_pass_rate']:.0%}"
        )
    if summary["attempts"] == 0:
        failures.append(
            "no sample was replayed (every sample is marked not re-runnable, without recorded "
            "tool results)"
        )
    reasons = [item["detail"] for item in found] + failures
    if found:
        return Run.Verdict.REGRESSED, reasons
    if failures:
        return Run.Verdict.FAILED, reasons
    return Run.Verdict.PASSED, reasons
