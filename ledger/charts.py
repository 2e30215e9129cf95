"""Plotly figures of load-test evidence: pure functions from plain data to a Figure.

Each chart comes with a `*_rows` function returning the same numbers as table
rows, for the table beside the chart. Nothing here reads the database; the
plain data comes from `ledger.queries` (latency_points, level_points,
ttft_cdf_series, service_slo). Every series differs by marker, dash or fill
pattern as well as colour, so the charts read in greyscale and print.

Pages fit a figure with `fit_to_page` and hand it to the template with
`lib.charts.figure_spec`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NotRequired, TypedDict

import plotly.graph_objects as go
from plotly.subplots import make_subplots

# ---------------------------------------------------------------- plain data


class Slo(TypedDict):
    ttft_p95_ms: float | None
    ttft_p99_ms: float | None
    tpot_ms: float | None
    error_rate_pct: float | None
    # The performance boundary; no chart draws these, so plain data may leave them out.
    min_output_tokens_per_s: NotRequired[float | None]
    min_concurrency: NotRequired[float | None]
    timeout_rate_pct: NotRequired[float | None]


class LatencyPoint(TypedDict):
    """One workload class: the first load level of its newest report."""

    workload: str
    label: str
    ttft_p50_ms: float | None
    ttft_p95_ms: float | None
    ttft_p99_ms: float | None
    tpot_p50_ms: float | None
    tpot_p95_ms: float | None
    tpot_p99_ms: float | None
    status: str  # "current", "stale" or ""


class LevelPoint(TypedDict):
    """One load level of a report (a step of a sweep)."""

    name: str
    load: float | None
    load_axis: str  # concurrency, request_rate or requests_per_s
    output_tokens_per_s: float | None
    ttft_p95_ms: float | None
    tpot_p95_ms: float | None
    error_rate_pct: float | None
    within_slo: bool | None  # None: the service has no SLO to be within


class CdfSeries(TypedDict):
    label: str
    points: Sequence[tuple[float, float]]  # (TTFT ms, fraction of requests ≤ it)


# Okabe-Ito: distinguishable with the common colour-vision deficiencies.
COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000")
# The fills of the throughput-latency regions, by the start of their label.
REGION_FILLS = {"latency-sensitive": "#009E73", "throughput-first": "#D55E00"}
PATTERNS = ("", "/", "x", ".", "\\", "+")
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
SYMBOLS = ("circle", "square", "diamond", "triangle-up", "cross", "star")
PERCENTILES = ("p50", "p95", "p99")
LOAD_AXIS_LABELS = {
    "concurrency": "concurrency",
    "request_rate": "request rate (req/s)",
    "requests_per_s": "achieved requests/s",
}


def _layout(fig: go.Figure, title: str) -> go.Figure:
    fig.update_layout(
        title={"text": title},
        template="plotly_white",
        hovermode="closest",
        legend={"orientation": "h", "y": -0.2},
        margin={"l": 60, "r": 20, "t": 70, "b": 60},
    )
    return fig


def _fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return "—"
    return f"{value:,.1f}{(' ' + unit) if unit else ''}"


def _slo_line(fig: go.Figure, value: float | None, text: str, dash: str, **where) -> None:
    if value is None:
        return
    fig.add_hline(
        y=value,
        line_dash=dash,
        line_color="#444444",
        line_width=1.5,
        annotation_text=f"{text} {value:g} ms",
        annotation_position="top left",
        **where,
    )


# ---------------------------------------------------------------- (a) latency by workload


def _workload_label(point: LatencyPoint) -> str:
    return f"{point['label']} (stale)" if point["status"] == "stale" else point["label"]


def latency_by_workload_rows(points: Sequence[LatencyPoint], slo: Slo) -> list[dict]:
    """One row per workload class: TTFT and TPOT percentiles beside the SLOs."""
    return [
        {
            "workload": point["workload"],
            "label": point["label"],
            "status": point["status"],
            "ttft_p50_ms": point["ttft_p50_ms"],
            "ttft_p95_ms": point["ttft_p95_ms"],
            "ttft_p99_ms": point["ttft_p99_ms"],
            "tpot_p50_ms": point["tpot_p50_ms"],
            "tpot_p95_ms": point["tpot_p95_ms"],
            "tpot_p99_ms": point["tpot_p99_ms"],
            "slo_ttft_p95_ms": slo["ttft_p95_ms"],
            "slo_ttft_p99_ms": slo["ttft_p99_ms"],
            "slo_tpot_ms": slo["tpot_ms"],
        }
        for point in points
    ]


def latency_by_workload_figure(
    points: Sequence[LatencyPoint], slo: Slo, *, title: str = "Latency by workload class"
) -> go.Figure:
    """Grouped bars of p50/p95/p99 TTFT and TPOT per workload class, with the SLO lines."""
    fig = make_subplots(
        rows=1, cols=2, subplot_titles=("Time to first token", "Time per output token")
    )
    labels = [_workload_label(p) for p in points]
    for col, metric, name in ((1, "ttft", "TTFT"), (2, "tpot", "TPOT")):
        for i, pct in enumerate(PERCENTILES):
            values = [p[f"{metric}_{pct}_ms"] for p in points]  # type: ignore[literal-required]
            fig.add_trace(
                go.Bar(
                    name=f"{pct} {name}",
                    legendgroup=pct,
                    x=labels,
                    y=values,
                    marker={"color": COLOURS[i], "pattern": {"shape": PATTERNS[i]}},
                    text=[_fmt(v) for v in values],
                    textposition="outside",
                    hovertemplate=f"%{{x}}<br>{pct} {name}: %{{y:,.1f}} ms<extra></extra>",
                ),
                row=1,
                col=col,
            )
    _slo_line(fig, slo["ttft_p95_ms"], "SLO p95 TTFT", "dash", row=1, col=1)
    _slo_line(fig, slo["ttft_p99_ms"], "SLO p99 TTFT", "dot", row=1, col=1)
    _slo_line(fig, slo["tpot_ms"], "SLO p95 TPOT", "dash", row=1, col=2)
    fig.update_layout(barmode="group")
    fig.update_xaxes(title_text="Workload class")
    fig.update_yaxes(title_text="TTFT (ms)", row=1, col=1)
    fig.update_yaxes(title_text="TPOT (ms)", row=1, col=2)
    return _layout(fig, title)


# ---------------------------------------------------------------- (b) candidate vs live

_COMPARED = (("ttft_p95_ms", "p95 TTFT"), ("tpot_p95_ms", "p95 TPOT"))


def _delta(live: float | None, candidate: float | None) -> tuple[float | None, float | None]:
    if live is None or candidate is None:
        return None, None
    delta = candidate - live
    return delta, (delta / live * 100.0 if live else None)


def _delta_text(delta: float | None, pct: float | None) -> str:
    if delta is None:
        return "—"
    text = f"{delta:+,.1f} ms"
    return f"{text} ({pct:+.1f}%)" if pct is not None else text


def _paired(
    live: Sequence[LatencyPoint], candidate: Sequence[LatencyPoint]
) -> list[tuple[str, str, LatencyPoint | None, LatencyPoint | None]]:
    by_live = {p["workload"]: p for p in live}
    by_candidate = {p["workload"]: p for p in candidate}
    order = [p["workload"] for p in live] + [
        p["workload"] for p in candidate if p["workload"] not in by_live
    ]
    pairs = []
    for workload in order:
        either = by_live.get(workload) or by_candidate[workload]
        pairs.append((workload, either["label"], by_live.get(workload), by_candidate.get(workload)))
    return pairs


def comparison_rows(live: Sequence[LatencyPoint], candidate: Sequence[LatencyPoint]) -> list[dict]:
    """Per workload class and metric: live, candidate, and the candidate's delta."""
    rows = []
    for workload, label, old, new in _paired(live, candidate):
        for key, name in _COMPARED:
            before = old[key] if old else None  # type: ignore[literal-required]
            after = new[key] if new else None  # type: ignore[literal-required]
            delta, pct = _delta(before, after)
            rows.append(
                {
                    "workload": workload,
                    "label": label,
                    "metric": name,
                    "unit": "ms",
                    "live": before,
                    "candidate": after,
                    "delta": delta,
                    "delta_pct": pct,
                }
            )
    return rows


def comparison_figure(
    live: Sequence[LatencyPoint],
    candidate: Sequence[LatencyPoint],
    *,
    live_label: str = "live",
    candidate_label: str = "candidate",
    title: str = "Candidate vs live, per workload class",
) -> go.Figure:
    """Live and candidate bars side by side; the candidate's bars carry the delta."""
    pairs = _paired(live, candidate)
    labels = [label for _, label, _, _ in pairs]
    fig = make_subplots(rows=1, cols=2, subplot_titles=[name for _, name in _COMPARED])
    for col, (key, name) in enumerate(_COMPARED, start=1):
        before = [old[key] if old else None for _, _, old, _ in pairs]  # type: ignore[literal-required]
        after = [new[key] if new else None for _, _, _, new in pairs]  # type: ignore[literal-required]
        deltas = [_delta(b, a) for b, a in zip(before, after, strict=True)]
        fig.add_trace(
            go.Bar(
                name=live_label,
                legendgroup="live",
                showlegend=col == 1,
                x=labels,
                y=before,
                marker={"color": COLOURS[0], "pattern": {"shape": ""}},
                text=[_fmt(v) for v in before],
                textposition="outside",
                hovertemplate=f"%{{x}}<br>{live_label} {name}: %{{y:,.1f}} ms<extra></extra>",
            ),
            row=1,
            col=col,
        )
        fig.add_trace(
            go.Bar(
                name=candidate_label,
                legendgroup="candidate",
                showlegend=col == 1,
                x=labels,
                y=after,
                marker={"color": COLOURS[1], "pattern": {"shape": "/"}},
                text=[_delta_text(d, p) for d, p in deltas],
                textposition="outside",
                customdata=[
                    [_fmt(b, "ms"), _delta_text(d, p)]
                    for b, (d, p) in zip(before, deltas, strict=True)
                ],
                hovertemplate=(
                    f"%{{x}}<br>{candidate_label} {name}: %{{y:,.1f}} ms"
                    f"<br>{live_label}: %{{customdata[0]}}<br>delta: %{{customdata[1]}}<extra></extra>"
                ),
            ),
            row=1,
            col=col,
        )
        fig.update_yaxes(title_text=f"{name} (ms)", row=1, col=col)
    fig.update_layout(barmode="group")
    fig.update_xaxes(title_text="Workload class")
    return _layout(fig, title)


# ---------------------------------------------------------------- (c) throughput-latency


def _by_load(points: Sequence[LevelPoint]) -> list[LevelPoint]:
    return sorted(points, key=lambda p: (p["load"] is None, p["load"] or 0.0))


def _capacity_point(points: Sequence[LevelPoint]) -> LevelPoint | None:
    """The last level within SLO before the first that is not, in load order
    (the same walk as `ledger.queries.capacity_from_levels`)."""
    best = None
    for point in _by_load(points):
        if point["load"] is None:
            continue
        if not point["within_slo"]:
            break
        best = point
    return best


def _region(point: LevelPoint, boundary: LevelPoint | None, ordered: list[LevelPoint]) -> str:
    if point["within_slo"] is None:
        return ""
    if boundary is not None and ordered.index(point) <= ordered.index(boundary):
        return "latency-sensitive"
    return "throughput-first"


def throughput_latency_rows(points: Sequence[LevelPoint]) -> list[dict]:
    """One row per load level, lightest first, with its region."""
    ordered = _by_load(points)
    boundary = _capacity_point(points)
    return [
        {
            "level": p["name"],
            "load": p["load"],
            "load_axis": LOAD_AXIS_LABELS.get(p["load_axis"], p["load_axis"]),
            "output_tokens_per_s": p["output_tokens_per_s"],
            "ttft_p95_ms": p["ttft_p95_ms"],
            "tpot_p95_ms": p["tpot_p95_ms"],
            "error_rate_pct": p["error_rate_pct"],
            "within_slo": {True: "yes", False: "no", None: "no SLO"}[p["within_slo"]],
            "region": _region(p, boundary, ordered),
        }
        for p in ordered
    ]


def throughput_latency_figure(
    points: Sequence[LevelPoint], slo: Slo, *, title: str = "Throughput against latency"
) -> go.Figure:
    """Output tokens/s against p95 TTFT (top) and p95 TPOT (bottom), one marker per
    load level; the shaded regions split the levels within SLO (latency-sensitive
    traffic fits there) from those past it (throughput-first, batch work)."""
    ordered = [p for p in _by_load(points) if p["output_tokens_per_s"] is not None]
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.12,
        subplot_titles=("p95 time to first token", "p95 time per output token"),
    )
    x = [p["output_tokens_per_s"] for p in ordered]
    names = [p["name"] for p in ordered]
    verdicts = [
        "within SLO"
        if p["within_slo"]
        else "SLO breached"
        if p["within_slo"] is False
        else "no SLO"
        for p in ordered
    ]
    for row, key, name, dash in (
        (1, "ttft_p95_ms", "p95 TTFT", "solid"),
        (2, "tpot_p95_ms", "p95 TPOT", "dash"),
    ):
        # A breached level is an x whatever the colour; the two curves differ in symbol and dash.
        symbols = ["x" if p["within_slo"] is False else SYMBOLS[row - 1] for p in ordered]
        fig.add_trace(
            go.Scatter(
                name=name,
                x=x,
                y=[p[key] for p in ordered],  # type: ignore[literal-required]
                mode="lines+markers",
                line={"color": COLOURS[row - 1], "dash": dash},
                marker={"size": 10, "symbol": symbols},
                text=names,
                customdata=[[verdict] for verdict in verdicts],
                hovertemplate=(
                    f"%{{text}}<br>%{{x:,.1f}} output tokens/s<br>{name}: %{{y:,.1f}} ms"
                    "<br>%{customdata[0]}<extra></extra>"
                ),
            ),
            row=row,
            col=1,
        )
    _slo_line(fig, slo["ttft_p95_ms"], "SLO p95 TTFT", "dot", row=1, col=1)
    _slo_line(fig, slo["tpot_ms"], "SLO p95 TPOT", "dot", row=2, col=1)

    boundary = _capacity_point(ordered)
    has_slo = any(p["within_slo"] is not None for p in ordered)
    if ordered and has_slo:
        # `ordered` keeps only levels with a throughput; the filter tells mypy so.
        top = max(speed for speed in x if speed is not None) * 1.05
        edge = boundary["output_tokens_per_s"] if boundary else 0.0
        if boundary is not None:
            fig.add_vrect(
                x0=0,
                x1=edge,
                fillcolor=REGION_FILLS["latency-sensitive"],
                opacity=0.12,
                line_width=0,
                annotation_text="latency-sensitive (within SLO)",
                annotation_position="top left",
                row="all",
                col=1,
            )
        if boundary is None or boundary is not ordered[-1]:
            fig.add_vrect(
                x0=edge,
                x1=top,
                fillcolor=REGION_FILLS["throughput-first"],
                opacity=0.08,
                line_width=0,
                annotation_text="throughput-first (past SLO)",
                annotation_position="top right",
                row="all",
                col=1,
            )
    fig.update_xaxes(title_text="Output throughput (tokens/s)", row=2, col=1)
    fig.update_yaxes(title_text="p95 TTFT (ms)", row=1, col=1)
    fig.update_yaxes(title_text="p95 TPOT (ms)", row=2, col=1)
    return _layout(fig, title)


# ---------------------------------------------------------------- (d) TTFT CDF


def _at_fraction(points: Sequence[tuple[float, float]], fraction: float) -> float | None:
    for value, share in points:
        if share >= fraction - 1e-12:
            return value
    return None


def _share_within(points: Sequence[tuple[float, float]], bound: float | None) -> float | None:
    if bound is None or not points:
        return None
    share = 0.0
    for value, fraction in points:
        if value <= bound:
            share = fraction
        else:
            break
    return share * 100.0


def ttft_cdf_rows(series: Sequence[CdfSeries], slo: Slo) -> list[dict]:
    """Per series: TTFT at 50/90/95/99 % of requests read off the plotted curve, and
    the share of requests within the p95 TTFT SLO."""
    return [
        {
            "label": s["label"],
            "ttft_p50_ms": _at_fraction(s["points"], 0.50),
            "ttft_p90_ms": _at_fraction(s["points"], 0.90),
            "ttft_p95_ms": _at_fraction(s["points"], 0.95),
            "ttft_p99_ms": _at_fraction(s["points"], 0.99),
            "within_slo_pct": _share_within(s["points"], slo["ttft_p95_ms"]),
            "slo_ttft_p95_ms": slo["ttft_p95_ms"],
        }
        for s in series
    ]


def ttft_cdf_figure(
    series: Sequence[CdfSeries], slo: Slo, *, title: str = "Time to first token, distribution"
) -> go.Figure:
    """Step curves of the share of requests with a TTFT at or below x, one per series."""
    fig = go.Figure()
    for i, s in enumerate(series):
        fig.add_trace(
            go.Scatter(
                name=s["label"],
                x=[value for value, _ in s["points"]],
                y=[fraction * 100.0 for _, fraction in s["points"]],
                mode="lines+markers",
                line={
                    "shape": "hv",
                    "dash": DASHES[i % len(DASHES)],
                    "color": COLOURS[i % len(COLOURS)],
                },
                marker={"symbol": SYMBOLS[i % len(SYMBOLS)], "size": 5},
                hovertemplate=(
                    f"{s['label']}<br>%{{y:.1f}}% of requests ≤ %{{x:,.1f}} ms<extra></extra>"
                ),
            )
        )
    bound = slo["ttft_p95_ms"]
    if bound is not None:
        fig.add_vline(
            x=bound,
            line_dash="dash",
            line_color="#444444",
            annotation_text=f"SLO p95 TTFT {bound:g} ms",
            annotation_position="bottom right",
        )
        fig.add_hline(y=95, line_dash="dot", line_color="#888888", annotation_text="95 %")
    fig.update_xaxes(title_text="TTFT (ms)")
    fig.update_yaxes(title_text="Requests at or below (%)", range=[0, 101])
    return _layout(fig, title)


# ---------------------------------------------------------------- fitting a figure to a page


def fit_to_page(fig: go.Figure, *, height: int = 460) -> go.Figure:
    """The builders leave the size to the page: the width follows the container,
    the height is fixed so the div does not collapse."""
    fig.update_layout(
        height=height,
        # Pinned to the bottom of the figure, below the (sometimes slanted) tick labels
        # and the axis title, which a legend placed relative to the plot would cover.
        legend={"yref": "container", "y": 0, "yanchor": "bottom", "x": 0, "xanchor": "left"},
        margin={"b": 140},
    )
    return fig


def regions_in_the_legend(fig: go.Figure) -> go.Figure:
    """Name the shaded regions in the legend rather than inside each panel.

    `throughput_latency_figure` labels them at the top of the panels, where the
    SLO line is labelled too; on a phone the labels cover each other or the curve.
    """
    named: dict[str, str] = {}

    def hide(annotation) -> None:
        text = annotation.text or ""
        for region, colour in REGION_FILLS.items():
            if text.startswith(region):
                named.setdefault(text, colour)
                annotation.update(visible=False)

    fig.for_each_annotation(hide)
    for text, colour in named.items():
        fig.add_trace(
            go.Scatter(
                x=[None],
                y=[None],
                mode="markers",
                name=f"shaded: {text}",
                marker={"symbol": "square", "size": 14, "color": colour, "opacity": 0.3},
                hoverinfo="skip",
            )
        )
    return fig
