"""A gray stage's analysis: the plan's `analysis` with its defaults, the PromQL that
measures each guard metric of one side (what an SRE pastes into Prometheus), and the
series the loop fetches to measure many stages at once.

The plan's stage says::

    "analysis": {"source": "prometheus", "interval_s": 60, "consecutive_error_limit": 3,
                 "on_breach": "hold" | "rollback", "auto_promote": false,
                 "queries": {"ttft_p95_ms": {"candidate": "<PromQL>", "baseline": "<PromQL>"}}}

Only `source` is required. Each tick measures the last `interval_s` seconds. A side is
the routed backends of a revision (the candidate's, the live one's); a backend's series
are those its Prometheus matcher selects (`replay.models.Backend.matchers`).

**Defaults per engine**, from the metric names `ledger.metrics_import.engines` knows:
p95/p99 TTFT from the TTFT histogram's buckets, TPOT as the mean of the inter-token
latency histogram (llama.cpp: decode seconds over tokens), the error rate from the
aborted share of finished requests (SGLang: aborted over all; TGI: failures over
all), and the requests from the same counters. A metric the engine does not expose
(TGI has no TTFT histogram; llama.cpp none at all; no engine counts structured-output
errors) has no default: the plan names its query, or the guard is not measured and
reads inconclusive — never a pass.

**How the loop measures** (`measure_series`, `side_measures`): it asks Prometheus for
the *increase* over the window of each series it needs, per backend — one query for
all backends whose matcher is a single equality on one label (`{model_name=~"a|b|c"}`,
split by that label), one per backend otherwise — and computes each side's measures
in Python, the quantiles with `histogram_quantile` as PromQL computes them. Rates and
increases over one window differ only by the window's length, so the numbers equal
those of the pasted queries.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ledger.metrics_import.engines import ENGINES, EngineMetrics
from ledger.metrics_import.histograms import histogram_quantile
from lib.promql import Matcher
from releases.policy import ANALYSIS_ON_BREACH_DEFAULT

DEFAULT_INTERVAL_S = 60
DEFAULT_CONSECUTIVE_ERROR_LIMIT = 3
# The metrics a default query measures; the others need the plan's own query.
QUANTILES = {"ttft_p95_ms": 0.95, "ttft_p99_ms": 0.99}


@dataclass(frozen=True)
class AnalysisSpec:
    source: str
    interval_s: int
    consecutive_error_limit: int
    on_breach: str  # hold | rollback
    auto_promote: bool
    queries: dict[str, dict[str, str]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "interval_s": self.interval_s,
            "consecutive_error_limit": self.consecutive_error_limit,
            "on_breach": self.on_breach,
            "auto_promote": self.auto_promote,
            "queries": self.queries,
        }


def analysis_spec(given: Mapping[str, Any] | None, *, tier: str) -> AnalysisSpec | None:
    """The plan's analysis with every default filled in; None when the stage has none."""
    if not given:
        return None
    return AnalysisSpec(
        source=str(given.get("source", "prometheus")),
        interval_s=int(given.get("interval_s", DEFAULT_INTERVAL_S)),
        consecutive_error_limit=int(
            given.get("consecutive_error_limit", DEFAULT_CONSECUTIVE_ERROR_LIMIT)
        ),
        on_breach=str(given.get("on_breach") or ANALYSIS_ON_BREACH_DEFAULT[tier]),
        auto_promote=bool(given.get("auto_promote", False)),
        queries={k: dict(v) for k, v in (given.get("queries") or {}).items()},
    )


# ---------------------------------------------------------------- the series of an engine


@dataclass(frozen=True)
class Series:
    """One counter (or histogram part) the loop fetches the increase of."""

    key: str  # ttft_bucket, finished, requests, aborted, failures, tpot_sum, tpot_count
    metric: str  # as Prometheus names it
    by: tuple[str, ...] = ()  # labels kept besides the backend's (le, finished_reason)


def _counter(engine: EngineMetrics, name: str) -> str:
    # The Rust metrics crate (TGI) exposes counters without prometheus_client's _total.
    return name if engine.name == "tgi" else f"{name}_total"


def engine_series(engine_name: str) -> list[Series]:
    """What measures a side served by `engine_name` (none for an engine not known)."""
    engine = ENGINES.get(engine_name)
    if engine is None:
        return []
    series: list[Series] = []
    if engine.ttft:
        series.append(Series("ttft_bucket", f"{engine.ttft[0]}_bucket", ("le",)))
    if engine.finished:
        series.append(
            Series("finished", _counter(engine, engine.finished), (engine.finished_label,))
        )
    if engine.requests:
        series.append(Series("requests", _counter(engine, engine.requests[0])))
    if engine.aborted:
        series.append(Series("aborted", _counter(engine, engine.aborted[0])))
    if engine.failures:
        series.append(Series("failures", _counter(engine, engine.failures)))
    if engine.tpot:
        series.append(Series("tpot_sum", f"{engine.tpot[0]}_sum"))
        series.append(Series("tpot_count", f"{engine.tpot[0]}_count"))
    elif engine.decode_seconds:
        seconds, tokens = engine.decode_seconds
        series.append(Series("tpot_sum", _counter(engine, seconds)))
        series.append(Series("tpot_count", _counter(engine, tokens)))
    return series


# ---------------------------------------------------------------- PromQL an SRE pastes


def _selector(matchers: Sequence[Matcher], extra: str = "") -> str:
    parts = [str(m) for m in matchers]
    if extra:
        parts.append(extra)
    return "{" + ", ".join(parts) + "}"


def _over(
    function: str, metric: str, side: Sequence[Sequence[Matcher]], window: str, extra: str = ""
) -> str:
    vectors = [f"{function}({metric}{_selector(m, extra)}[{window}])" for m in side]
    return vectors[0] if len(vectors) == 1 else "(" + " or ".join(vectors) + ")"


def side_queries(
    engine_name: str, side: Sequence[Sequence[Matcher]], *, window_s: int
) -> dict[str, str]:
    """The PromQL measuring each guard metric of one side (its backends' matchers), as
    rates over the window: what the page shows and an SRE pastes into Prometheus."""
    engine = ENGINES.get(engine_name)
    if engine is None or not side:
        return {}
    window = f"{window_s}s"
    queries: dict[str, str] = {}
    if engine.ttft:
        buckets = _over("rate", f"{engine.ttft[0]}_bucket", side, window)
        for metric, q in QUANTILES.items():
            queries[metric] = f"1000 * histogram_quantile({q}, sum by (le) ({buckets}))"
    if engine.tpot:
        total = _over("rate", f"{engine.tpot[0]}_sum", side, window)
        count = _over("rate", f"{engine.tpot[0]}_count", side, window)
        queries["tpot_ms"] = f"1000 * sum({total}) / sum({count})"
    elif engine.decode_seconds:
        seconds, tokens = (_counter(engine, name) for name in engine.decode_seconds)
        queries["tpot_ms"] = (
            f"1000 * sum({_over('rate', seconds, side, window)}) / "
            f"sum({_over('rate', tokens, side, window)})"
        )
    if engine.finished:
        finished = _counter(engine, engine.finished)
        aborted = f'{engine.finished_label}=~"{"|".join(engine.aborted_reasons)}"'
        queries["error_rate_pct"] = (
            f"100 * sum({_over('rate', finished, side, window, aborted)}) / "
            f"sum({_over('rate', finished, side, window)})"
        )
    else:
        failed = engine.aborted[0] if engine.aborted else engine.failures
        if failed and engine.requests:
            queries["error_rate_pct"] = (
                f"100 * sum({_over('rate', _counter(engine, failed), side, window)}) / "
                f"sum({_over('rate', _counter(engine, engine.requests[0]), side, window)})"
            )
    return queries


# ---------------------------------------------------------------- what the loop asks


@dataclass(frozen=True)
class BackendSide:
    """One backend as the loop measures it."""

    backend: str  # its name
    engine: str
    matchers: tuple[Matcher, ...]

    @property
    def group(self) -> tuple[str, str] | None:
        """(label, value) when its matcher is one plain equality: batchable with others."""
        if len(self.matchers) == 1:
            only = self.matchers[0]
            if only.operator == "=" and "\\" not in only.value:
                return only.label, only.value
        return None


@dataclass(frozen=True)
class BatchQuery:
    """One instant query, and how its samples map back to backends."""

    promql: str
    series: Series
    window_s: int
    label: str | None  # the label telling backends apart (None: one backend)
    # label value → the backends it selects (several when their matchers are the same;
    # "" → the one backend of an unbatched query)
    backends: dict[str, tuple[str, ...]]

    @property
    def names(self) -> set[str]:
        return {name for names in self.backends.values() for name in names}


def _regex_alternatives(values: Iterable[str]) -> str:
    # RE2 metacharacters escaped; then the PromQL string's own backslashes.
    return "|".join(re.sub(r"([\\.^$|?*+()\[\]{}])", r"\\\1", v) for v in sorted(values)).replace(
        "\\", "\\\\"
    )


def batch_queries(backends: Iterable[BackendSide], *, window_s: int) -> list[BatchQuery]:
    """Every query one tick sends for `backends` measured over `window_s`: per series,
    one for all backends sharing a plain-equality label, one per other backend."""
    grouped: dict[tuple[Series, str], dict[str, tuple[str, ...]]] = defaultdict(dict)
    alone: list[tuple[Series, BackendSide]] = []
    for backend in backends:
        for series in engine_series(backend.engine):
            if backend.group is not None:
                label, value = backend.group
                selected = grouped[(series, label)]
                selected[value] = (*selected.get(value, ()), backend.backend)
            else:
                alone.append((series, backend))
    queries = []
    window = f"{window_s}s"
    for (series, label), names in sorted(
        grouped.items(), key=lambda item: (item[0][0].metric, item[0][1])
    ):
        by = ", ".join((label, *series.by))
        selector = f'{{{label}=~"{_regex_alternatives(names)}"}}'
        queries.append(
            BatchQuery(
                promql=f"sum by ({by}) (increase({series.metric}{selector}[{window}]))",
                series=series,
                window_s=window_s,
                label=label,
                backends=names,
            )
        )
    for series, backend in alone:
        by = f"sum by ({', '.join(series.by)}) " if series.by else "sum "
        queries.append(
            BatchQuery(
                promql=f"{by}(increase({series.metric}{_selector(backend.matchers)}[{window}]))",
                series=series,
                window_s=window_s,
                label=None,
                backends={"": (backend.backend,)},
            )
        )
    return queries


# Per backend, per series key: {the `by` labels' values: increase over the window}.
Measured = dict[str, dict[str, dict[tuple[str, ...], float]]]


def measure_series(query: BatchQuery, samples: Sequence[Mapping[str, Any]], into: Measured) -> None:
    """File an instant vector's samples (Prometheus' `result`) under their backends."""
    for sample in samples:
        labels = sample.get("metric") or {}
        names = query.backends.get(labels.get(query.label, "") if query.label else "", ())
        value = float(sample["value"][1])
        if math.isnan(value):
            continue
        key = tuple(str(labels.get(label, "")) for label in query.series.by)
        for name in names:
            bucket = into.setdefault(name, {}).setdefault(query.series.key, {})
            bucket[key] = bucket.get(key, 0.0) + value


def _summed(
    backends: Sequence[str], measured: Measured, key: str
) -> dict[tuple[str, ...], float] | None:
    found = [measured[b][key] for b in backends if key in measured.get(b, {})]
    if not found:
        return None
    total: dict[tuple[str, ...], float] = defaultdict(float)
    for part in found:
        for labels, value in part.items():
            total[labels] += value
    return dict(total)


def _le(text: str) -> float:
    return math.inf if text in ("+Inf", "Inf", "inf") else float(text)


def side_measures(engine_name: str, backends: Sequence[str], measured: Measured) -> dict[str, Any]:
    """One side's measures from its backends' increases: requests, ttft_p95_ms,
    ttft_p99_ms, tpot_ms, error_rate_pct (each left out when not measured), and the TTFT
    histogram as cumulative buckets in seconds (`ttft_buckets`, [[le, count], …])."""
    engine = ENGINES.get(engine_name)
    if engine is None:
        return {}
    measures: dict[str, Any] = {}
    requests: float | None = None
    failed: float | None = None
    finished = _summed(backends, measured, "finished")
    if finished is not None:
        requests = sum(finished.values())
        failed = sum(v for (reason,), v in finished.items() if reason in engine.aborted_reasons)
    else:
        counted = _summed(backends, measured, "requests")
        if counted is not None:
            requests = sum(counted.values())
            bad = _summed(backends, measured, "aborted") or _summed(backends, measured, "failures")
            failed = sum(bad.values()) if bad is not None else None
    buckets_by_le = _summed(backends, measured, "ttft_bucket")
    if buckets_by_le is not None:
        buckets = sorted((_le(le), count) for (le,), count in buckets_by_le.items())
        measures["ttft_buckets"] = [
            [le if math.isfinite(le) else "+Inf", count] for le, count in buckets
        ]
        for metric, q in QUANTILES.items():
            value = histogram_quantile(q, buckets)
            if value is not None:
                measures[metric] = round(1000 * value, 3)
        if requests is None and buckets and math.isinf(buckets[-1][0]):
            requests = buckets[-1][1]
    tpot_sum = _summed(backends, measured, "tpot_sum")
    tpot_count = _summed(backends, measured, "tpot_count")
    if tpot_sum is not None and tpot_count is not None and sum(tpot_count.values()) > 0:
        measures["tpot_ms"] = round(1000 * sum(tpot_sum.values()) / sum(tpot_count.values()), 3)
    if requests is not None:
        measures["requests"] = round(requests)
        if failed is not None and requests > 0:
            measures["error_rate_pct"] = round(100 * failed / requests, 4)
    return measures
