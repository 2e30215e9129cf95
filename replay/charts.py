"""Plotly figures of replay runs: pure functions from plain data to a Figure.

Each chart comes with a `*_rows` function returning the same numbers as table
rows, for the table beside the chart. Nothing here reads the database: the
trend points come from `replay.queries.backend_trend`, the comparison rows
from the run pages. Series differ by marker and dash as well as colour, so
the charts read in greyscale and print.

Pages hand a figure to the template with `lib.charts.figure_spec`; plotly.js
is served from static/vendor.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TypedDict

import plotly.graph_objects as go
from django.utils.translation import gettext as _
from plotly.subplots import make_subplots

# Okabe-Ito, as in ledger.charts: distinguishable with common colour-vision deficiencies.
COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7")

# ---------------------------------------------------------------- plain data


class TrendPoint(TypedDict):
    """One finished run of a backend: the shape of `replay.queries.backend_trend`'s points."""

    run: int
    sample_set: str  # name@version
    finished_at: dt.datetime
    verdict: str
    pass_rate: float | None  # 0..1
    ttft_p50_ms: float | None
    ttft_p95_ms: float | None
    tpot_p50_ms: float | None
    tpot_p95_ms: float | None


class SampleComparison(TypedDict):
    """One sample's pass rate (0..1) in each of two runs; None when it did not run."""

    key: str
    category: str
    a: float | None
    b: float | None


class LatencyComparison(TypedDict):
    """One latency percentile of two runs, in ms."""

    metric: str  # e.g. "p95 TTFT"
    a: float | None
    b: float | None


# Below the x axis title for the tall trend chart; above the plot for the bar charts,
# whose axis title a phone-width legend would cover.
_LEGEND_BELOW = {"orientation": "h", "y": -0.12}
_LEGEND_ABOVE = {"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom"}


def _layout(fig: go.Figure, title: str, height: int, legend: dict = _LEGEND_BELOW) -> go.Figure:
    fig.update_layout(
        title={"text": title},
        template="plotly_white",
        hovermode="closest",
        height=height,
        autosize=True,
        legend=legend,
        margin={"l": 60, "r": 20, "t": 90, "b": 60},
    )
    return fig


def _pct(value: float | None) -> float | None:
    return None if value is None else round(value * 100.0, 2)


def _iso(value: dt.datetime | None) -> str:
    return value.isoformat(timespec="seconds") if value is not None else ""


# ---------------------------------------------------------------- trend of a backend


def trend_rows(points: Sequence[TrendPoint]) -> list[dict]:
    """One row per run, oldest first: pass rate in %, latencies in ms."""
    ordered = sorted(points, key=lambda p: p["finished_at"])
    return [
        {
            "run_id": p["run"],
            "sample_set": p["sample_set"],
            "verdict": p["verdict"],
            "finished_at": p["finished_at"],
            "pass_rate_pct": _pct(p["pass_rate"]),
            "ttft_p50_ms": p["ttft_p50_ms"],
            "ttft_p95_ms": p["ttft_p95_ms"],
            "tpot_p50_ms": p["tpot_p50_ms"],
            "tpot_p95_ms": p["tpot_p95_ms"],
        }
        for p in ordered
    ]


def trend_figure(points: Sequence[TrendPoint], *, title: str | None = None) -> go.Figure:
    """Pass rate (%), TTFT p50/p95 and TPOT p50/p95 (ms) against the time each run finished."""
    title = title or _("Trend over runs")
    rows = trend_rows(points)
    x = [_iso(row["finished_at"]) for row in rows]
    runs = [[f"run {row['run_id']} ({row['sample_set']}, {row['verdict']})"] for row in rows]
    fig = make_subplots(
        rows=3,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.08,
        subplot_titles=(_("Pass rate"), _("Time to first token"), _("Time per output token")),
    )
    fig.add_trace(
        go.Scatter(
            name=_("pass rate"),
            x=x,
            y=[row["pass_rate_pct"] for row in rows],
            mode="lines+markers",
            line={"color": COLOURS[2]},
            marker={"symbol": "diamond", "size": 8},
            customdata=runs,
            hovertemplate="%{customdata[0]}, %{x}<br>"
            + _("pass rate")
            + " %{y:.1f}%<extra></extra>",
        ),
        row=1,
        col=1,
    )
    for row_no, metric, name in ((2, "ttft", "TTFT"), (3, "tpot", "TPOT")):
        for i, (pct, dash, symbol) in enumerate(
            (("p50", "solid", "circle"), ("p95", "dash", "square"))
        ):
            fig.add_trace(
                go.Scatter(
                    name=f"{name} {pct}",
                    x=x,
                    y=[row[f"{metric}_{pct}_ms"] for row in rows],
                    mode="lines+markers",
                    line={"color": COLOURS[i], "dash": dash},
                    marker={"symbol": symbol, "size": 7},
                    customdata=runs,
                    hovertemplate=(
                        f"%{{customdata[0]}}, %{{x}}<br>{name} {pct} %{{y:,.1f}} ms<extra></extra>"
                    ),
                ),
                row=row_no,
                col=1,
            )
    fig.update_yaxes(title_text=_("Pass rate (%)"), range=[0, 105], row=1, col=1)
    fig.update_yaxes(title_text="TTFT (ms)", rangemode="tozero", row=2, col=1)
    fig.update_yaxes(title_text="TPOT (ms)", rangemode="tozero", row=3, col=1)
    fig.update_xaxes(title_text=_("Run finished at"), row=3, col=1)
    return _layout(fig, title, height=720)


# ---------------------------------------------------------------- two runs side by side


def _delta(a: float | None, b: float | None) -> tuple[float | None, float | None]:
    if a is None or b is None:
        return None, None
    delta = b - a
    return delta, (delta / a * 100.0 if a else None)


def pass_rate_comparison_rows(samples: Sequence[SampleComparison]) -> list[dict]:
    """Per sample: both pass rates in %, the change in points, and whether it got worse."""
    rows = []
    for sample in samples:
        a, b = _pct(sample["a"]), _pct(sample["b"])
        delta = None if a is None or b is None else round(b - a, 2)
        rows.append(
            {
                "key": sample["key"],
                "category": sample["category"],
                "a_pct": a,
                "b_pct": b,
                "delta_points": delta,
                "worse": delta is not None and delta < 0,
            }
        )
    return rows


def pass_rate_comparison_figure(
    samples: Sequence[SampleComparison],
    *,
    label_a: str | None = None,
    label_b: str | None = None,
    title: str | None = None,
) -> go.Figure:
    """Horizontal bars, one pair per sample, so long sample keys stay readable on a phone."""
    label_a, label_b = label_a or _("run A"), label_b or _("run B")
    title = title or _("Pass rate per sample")
    rows = pass_rate_comparison_rows(samples)
    keys = [row["key"] for row in rows]
    fig = go.Figure()
    for i, (side, label, pattern) in enumerate((("a", label_a, ""), ("b", label_b, "/"))):
        fig.add_trace(
            go.Bar(
                name=label,
                y=keys,
                x=[row[f"{side}_pct"] for row in rows],
                orientation="h",
                marker={"color": COLOURS[i], "pattern": {"shape": pattern}},
                hovertemplate=f"%{{y}}<br>{label}: %{{x:.0f}}%<extra></extra>",
            )
        )
    fig.update_layout(barmode="group")
    fig.update_xaxes(title_text=_("Pass rate (%)"), range=[0, 105])
    fig.update_yaxes(title_text=_("Sample"), autorange="reversed", automargin=True)
    return _layout(fig, title, height=max(320, 140 + 44 * len(rows)), legend=_LEGEND_ABOVE)


def latency_comparison_rows(metrics: Sequence[LatencyComparison]) -> list[dict]:
    """Per percentile: both values in ms, and B's change against A in ms and %."""
    rows = []
    for metric in metrics:
        delta, pct = _delta(metric["a"], metric["b"])
        rows.append(
            {
                "metric": metric["metric"],
                "unit": "ms",
                "a": metric["a"],
                "b": metric["b"],
                "delta": delta,
                "delta_pct": pct,
            }
        )
    return rows


def latency_comparison_figure(
    metrics: Sequence[LatencyComparison],
    *,
    label_a: str | None = None,
    label_b: str | None = None,
    title: str | None = None,
) -> go.Figure:
    """Grouped bars per percentile; B's bars carry its change against A."""
    label_a, label_b = label_a or _("run A"), label_b or _("run B")
    title = title or _("Latency percentiles")
    rows = latency_comparison_rows(metrics)
    names = [row["metric"] for row in rows]
    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            name=label_a,
            x=names,
            y=[row["a"] for row in rows],
            marker={"color": COLOURS[0], "pattern": {"shape": ""}},
            hovertemplate=f"%{{x}}<br>{label_a}: %{{y:,.1f}} ms<extra></extra>",
        )
    )
    fig.add_trace(
        go.Bar(
            name=label_b,
            x=names,
            y=[row["b"] for row in rows],
            marker={"color": COLOURS[1], "pattern": {"shape": "/"}},
            text=[_delta_text(row["delta"], row["delta_pct"]) for row in rows],
            textposition="outside",
            hovertemplate=f"%{{x}}<br>{label_b}: %{{y:,.1f}} ms (%{{text}})<extra></extra>",
        )
    )
    fig.update_layout(barmode="group")
    fig.update_xaxes(title_text=_("Percentile"))
    fig.update_yaxes(title_text=_("Latency (ms)"), rangemode="tozero")
    return _layout(fig, title, height=400, legend=_LEGEND_ABOVE)


def _delta_text(delta: float | None, pct: float | None) -> str:
    if delta is None:
        return "—"
    text = f"{delta:+,.1f} ms"
    return f"{text} ({pct:+.1f}%)" if pct is not None else text
