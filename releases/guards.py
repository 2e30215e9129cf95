"""Judging a gray stage: each observation against the stage's guards, then the stage
from all its observations.

A guard bounds one metric of the candidate, **absolutely** (p95 TTFT ≤ 800 ms) and/or
**relative to the live baseline** (≤ +20 % of live). One guard's verdict:

- *pass*: every bound it has holds;
- *fail*: a bound is crossed (with raw per-request TTFTs, a relative crossing counts
  only when a Mann-Whitney U test says the candidate is slower than the baseline
  with p < `SIGNIFICANCE`; with TTFT histogram buckets on both sides and no raw values,
  only when the same test on the buckets says so: `histogram_shift`);
- *inconclusive*: nothing measured, fewer requests than the guard's minimum, no
  baseline for a relative bound, or a relative crossing the test cannot tell from
  noise.

Raw TTFTs arrive beside the aggregates (`candidate_raw`, `baseline_raw`). TTFT
histogram buckets, as Prometheus measures them, arrive inside a side's aggregates under
`ttft_buckets`: cumulative `[le, count]` pairs over the observation's window, `le` as
the histogram exposes it (seconds for vLLM's `vllm:time_to_first_token_seconds_bucket`;
only order and equality matter, so both sides must use the same unit) and `"+Inf"` for
the last, `count` the `increase()` over the window (extrapolated, so not always whole):

    {"ttft_p95_ms": 950, "ttft_buckets": [[0.1, 3], [0.25, 40], [0.5, 231], ["+Inf", 412]]}

A side with buckets and no `requests` counts its +Inf bucket's requests.

An observation is *error* when its metrics source failed (nothing is judged), else
*fail* if a guard that is not dry-run failed, *inconclusive* if one was inconclusive,
and *pass*. A dry-run guard is judged and shown but never moves a verdict, so a new
guard can be tried out. A stage is *breached* by one failure of a critical guard, by
more failed observations than its `failure_limit`, or by more errors than its
`error_limit` (errors have their own budget and never count as a pass); an
inconclusive latest observation *holds* it for a person; a failed one within the
budget leaves it *failing* (it cannot be promoted until an observation passes).

Pure functions over plain data: no database here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

import numpy as np
from django.utils.translation import gettext_noop

from releases.histogram_shift import ShiftTest, histogram_shift

GuardStatus = Literal["pass", "fail", "inconclusive"]
ObservationVerdict = Literal["pass", "fail", "inconclusive", "error"]
StageVerdict = Literal["awaiting", "pass", "failing", "held", "breached"]

# The p-value under which a relative shift in raw latencies counts as real.
SIGNIFICANCE = 0.05
# Fewer raw values than this on either side: the test is not run (inconclusive).
MIN_RAW_VALUES = 8
# A stage's budgets when the plan says nothing (Argo Rollouts' failureLimit, and its
# consecutiveErrorLimit's spirit).
DEFAULT_FAILURE_LIMIT = 1
DEFAULT_ERROR_LIMIT = 2


@dataclass(frozen=True)
class Metric:
    label: str
    unit: str  # "ms" or "%"
    higher_is_worse: bool = True
    raw: bool = False  # computable from raw per-request TTFTs (or their histogram)


# What an observation measures, by the key it is posted under. The labels stay English
# here (a guard's result records its label); a page translates them (`guard_label`).
MEASURES: dict[str, Metric] = {
    "ttft_p95_ms": Metric(gettext_noop("p95 TTFT"), "ms", raw=True),
    "ttft_p99_ms": Metric(gettext_noop("p99 TTFT"), "ms", raw=True),
    "tpot_ms": Metric(gettext_noop("TPOT"), "ms"),
    "error_rate_pct": Metric(gettext_noop("error rate"), "%"),
    "structured_error_rate_pct": Metric(gettext_noop("structured-output error rate"), "%"),
    "tool_call_success_pct": Metric(
        gettext_noop("tool-call success rate"), "%", higher_is_worse=False
    ),
    "refusal_rate_pct": Metric(gettext_noop("refusal rate"), "%"),
}

# What a guard may bound: every measure, by the same name. An observation may still give
# the older `json_valid_pct` instead of the structured-output error rate (100 minus it).
GUARD_METRICS: dict[str, Metric] = dict(MEASURES)
LEGACY_MEASURES = ("json_valid_pct",)
# Where a side's aggregates carry its TTFT histogram (see the module docstring).
BUCKETS_KEY = "ttft_buckets"


class GuardSpec(TypedDict):
    metric: str
    max: float | None  # the absolute bound (a floor for a higher-is-better metric)
    max_increase_pct: float | None  # how much worse than the baseline, in % of it
    min_requests: int
    critical: bool
    dry_run: bool


class GuardResult(TypedDict):
    metric: str
    label: str
    status: GuardStatus
    value: float | None
    baseline: float | None
    why: str
    critical: bool
    dry_run: bool


def guard_specs(guards: dict[str, Any] | None) -> list[GuardSpec]:
    """The gray plan's guards of one stage in their full form.

    A plan may give a bare number (`{"ttft_p95_ms": 800}`: an absolute bound) or an
    object (`{"ttft_p95_ms": {"max": 800, "max_increase_pct": 20, "critical": true}}`).
    """
    specs: list[GuardSpec] = []
    for metric, given in (guards or {}).items():
        if metric not in GUARD_METRICS:
            continue
        rule = given if isinstance(given, dict) else {"max": given}
        specs.append(
            GuardSpec(
                metric=metric,
                max=_number(rule.get("max")),
                max_increase_pct=_number(rule.get("max_increase_pct")),
                min_requests=int(rule.get("min_requests") or 0),
                critical=bool(rule.get("critical", False)),
                dry_run=bool(rule.get("dry_run", False)),
            )
        )
    return specs


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _fmt(value: float, unit: str) -> str:
    return f"{value:,.4g} {unit}" if unit == "ms" else f"{value:.4g} %"


def measured(side: dict[str, Any], raw_ttft: Sequence[float], metric: str) -> float | None:
    """One metric of one side: as posted, or computed from raw TTFTs (p95/p99, numpy's
    linear interpolation as the load-test tools use)."""
    if metric == "structured_error_rate_pct":
        valid = _number(side.get("json_valid_pct"))
        given = _number(side.get("structured_error_rate_pct"))
        return given if given is not None else (100.0 - valid if valid is not None else None)
    value = _number(side.get(metric))
    if value is None and len(raw_ttft) and metric in ("ttft_p95_ms", "ttft_p99_ms"):
        value = float(
            np.percentile(np.asarray(raw_ttft, dtype=float), 95 if "95" in metric else 99)
        )
    return value


def requests_of(side: dict[str, Any], raw_ttft: Sequence[float]) -> int | None:
    count = side.get("requests")
    if isinstance(count, int) and not isinstance(count, bool):
        return count
    buckets = ttft_buckets(side)
    in_buckets = max((total for le, total in buckets if le == math.inf), default=0.0)
    return len(raw_ttft) or math.floor(in_buckets + 0.5) or None


def ttft_buckets(side: dict[str, Any]) -> list[tuple[float, float]]:
    """A side's TTFT histogram as (le, cumulative count) pairs, "+Inf" read as infinity;
    empty when it has none (the observation's schema refuses a malformed one)."""
    given = side.get(BUCKETS_KEY)
    if not isinstance(given, list):
        return []
    buckets: list[tuple[float, float]] = []
    for pair in given:
        if not isinstance(pair, list | tuple) or len(pair) != 2:
            return []
        le = math.inf if pair[0] == "+Inf" else _number(pair[0])
        count = _number(pair[1])
        if le is None or count is None:
            return []
        buckets.append((le, count))
    return buckets


def bucket_shift(candidate: dict[str, Any], baseline: dict[str, Any]) -> ShiftTest | None:
    """The histogram shift test when both sides carry TTFT buckets, else None."""
    mine, theirs = ttft_buckets(candidate), ttft_buckets(baseline)
    if not mine or not theirs:
        return None
    return histogram_shift(mine, theirs, min_requests=MIN_RAW_VALUES, significance=SIGNIFICANCE)


def judge_guard(
    spec: GuardSpec,
    candidate: dict[str, Any],
    baseline: dict[str, Any],
    candidate_raw: Sequence[float] = (),
    baseline_raw: Sequence[float] = (),
) -> GuardResult:
    metric = GUARD_METRICS[spec["metric"]]
    value = measured(candidate, candidate_raw, spec["metric"])
    base = measured(baseline, baseline_raw, spec["metric"])

    def result(status: GuardStatus, why: str) -> GuardResult:
        return GuardResult(
            metric=spec["metric"],
            label=metric.label,
            status=status,
            value=value,
            baseline=base,
            why=why,
            critical=spec["critical"],
            dry_run=spec["dry_run"],
        )

    if value is None:
        return result("inconclusive", f"no {metric.label} was measured for the candidate")
    requests = requests_of(candidate, candidate_raw)
    if spec["min_requests"] and (requests or 0) < spec["min_requests"]:
        return result(
            "inconclusive",
            f"{requests or 0} candidate requests, fewer than the guard's minimum of "
            f"{spec['min_requests']}",
        )
    failures: list[str] = []
    doubts: list[str] = []
    notes: list[str] = []
    bound = spec["max"]
    if bound is not None:
        crossed = value > bound if metric.higher_is_worse else value < bound
        word = "above" if metric.higher_is_worse else "below"
        text = f"{metric.label} {_fmt(value, metric.unit)} {word} the bound of {_fmt(bound, metric.unit)}"
        (failures if crossed else notes).append(
            text
            if crossed
            else f"{metric.label} {_fmt(value, metric.unit)} within {_fmt(bound, metric.unit)}"
        )
    allowed = spec["max_increase_pct"]
    if allowed is not None:
        if base is None:
            doubts.append(f"no baseline {metric.label} to compare with")
        elif base == 0:
            notes.append(f"the baseline {metric.label} is 0, so no relative bound applies")
            if bound is None:
                doubts.append(f"the baseline {metric.label} is 0: nothing to compare relatively")
        else:
            worse_pct = (
                (value - base) / base * 100
                if metric.higher_is_worse
                else (base - value) / base * 100
            )
            shift = f"{worse_pct:+.1f} % {'worse than' if worse_pct > 0 else 'against'} live ({_fmt(base, metric.unit)})"
            if worse_pct <= allowed:
                notes.append(f"{shift}, within +{allowed:g} %")
            elif metric.raw and len(candidate_raw) and len(baseline_raw):
                significant, detail = shift_is_significant(candidate_raw, baseline_raw)
                if significant:
                    failures.append(f"{shift}, over +{allowed:g} % ({detail})")
                else:
                    doubts.append(
                        f"{shift}, over +{allowed:g} %, but {detail}: the shift cannot be told "
                        "from noise"
                    )
            elif metric.raw and (binned := bucket_shift(candidate, baseline)) is not None:
                if binned.slower:
                    failures.append(f"{shift}, over +{allowed:g} % ({binned.why})")
                else:
                    doubts.append(
                        f"{shift}, over +{allowed:g} %, but the shift cannot be told from "
                        f"noise ({binned.why})"
                    )
            else:
                failures.append(f"{shift}, over +{allowed:g} %")
    if failures:
        return result("fail", "; ".join(failures))
    if doubts:
        return result("inconclusive", "; ".join(doubts))
    return result("pass", "; ".join(notes) or "no bound set")


def shift_is_significant(candidate: Sequence[float], baseline: Sequence[float]) -> tuple[bool, str]:
    """Whether the candidate's latencies are stochastically greater than the baseline's
    (one-sided Mann-Whitney U), and the figures that say so."""
    if len(candidate) < MIN_RAW_VALUES or len(baseline) < MIN_RAW_VALUES:
        return False, (
            f"Mann-Whitney U needs at least {MIN_RAW_VALUES} requests a side "
            f"({len(candidate)} and {len(baseline)} given)"
        )
    # scipy.stats takes 1.6 s to import: only a judge with raw latencies pays it.
    from scipy import stats  # type: ignore[import-untyped]  # scipy-stubs is a further package

    test = stats.mannwhitneyu(candidate, baseline, alternative="greater")
    p_value = float(test.pvalue)
    return p_value < SIGNIFICANCE, f"Mann-Whitney U p = {p_value:.3g}"


def judge_observation(
    specs: Iterable[GuardSpec],
    *,
    candidate: dict[str, Any],
    baseline: dict[str, Any],
    candidate_raw: Sequence[float] = (),
    baseline_raw: Sequence[float] = (),
    source_error: str = "",
) -> tuple[ObservationVerdict, list[GuardResult]]:
    if source_error:
        return "error", []
    results = [
        judge_guard(spec, candidate, baseline, candidate_raw, baseline_raw) for spec in specs
    ]
    counted = [r for r in results if not r["dry_run"]]
    if any(r["status"] == "fail" for r in counted):
        return "fail", results
    if any(r["status"] == "inconclusive" for r in counted):
        return "inconclusive", results
    return "pass", results


class ObservationLike(TypedDict):
    verdict: str
    guard_results: list[GuardResult]


def judge_stage(
    observations: Sequence[ObservationLike], *, failure_limit: int, error_limit: int
) -> tuple[StageVerdict, str]:
    """The stage's verdict from its observations, oldest first, and why."""
    if not observations:
        return "awaiting", "no observation has been posted yet"
    for number, observation in enumerate(observations, start=1):
        critical = [
            r
            for r in observation["guard_results"]
            if r["critical"] and not r["dry_run"] and r["status"] == "fail"
        ]
        if critical:
            return (
                "breached",
                f"critical guard failed in observation {number}: {critical[0]['why']}",
            )
    failed = sum(1 for o in observations if o["verdict"] == "fail")
    if failed > failure_limit:
        return "breached", (
            f"{failed} failed observations, more than the stage's failure budget of {failure_limit}"
        )
    errors = sum(1 for o in observations if o["verdict"] == "error")
    if errors > error_limit:
        return "breached", (
            f"the metrics source failed {errors} times, more than the stage's error budget "
            f"of {error_limit}"
        )
    latest = observations[-1]["verdict"]
    if latest == "inconclusive":
        return "held", "the latest observation is inconclusive: a person decides"
    if latest == "error":
        return "held", "the metrics source failed on the latest observation: a person decides"
    if latest == "fail":
        return "failing", (
            f"the latest observation failed; {failed} of the stage's failure budget of "
            f"{failure_limit} used, one more breaches it"
        )
    return "pass", "the latest observation passed every guard"
