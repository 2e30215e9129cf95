"""The analysis timeline as a chart: per guard metric measured, the candidate beside the
live baseline at each window's end, each point's verdict and action in its hover.
Pure: from `releases.governance.queries.analysis.analysis_timeline`'s ticks."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go
from django.utils.translation import gettext as _
from plotly.subplots import make_subplots

from releases.governance.queries.analysis import Tick
from releases.guards import GUARD_METRICS

# Okabe-Ito, as the other charts: candidate orange, baseline blue.
CANDIDATE, BASELINE = "#E69F00", "#0072B2"


def _measured(ticks: Sequence[Tick]) -> list[str]:
    seen: list[str] = []
    for tick in ticks:
        for result in tick.guards:
            if result.get("value") is not None and result["metric"] not in seen:
                seen.append(result["metric"])
    return seen


def analysis_figure(ticks: Sequence[Tick]) -> go.Figure | None:
    """None when no tick measured anything (every one an error)."""
    metrics = _measured(ticks)
    if not metrics:
        return None
    labels = [_(GUARD_METRICS[m].label) if m in GUARD_METRICS else m for m in metrics]
    fig = make_subplots(
        rows=len(metrics), cols=1, shared_xaxes=True, vertical_spacing=0.1, subplot_titles=labels
    )
    for row, metric in enumerate(metrics, start=1):
        points = [
            (tick, next(r for r in tick.guards if r["metric"] == metric))
            for tick in ticks
            if any(r["metric"] == metric for r in tick.guards)
        ]
        x = [tick.window_end.isoformat() for tick, _result in points]
        notes = [
            [
                f"{_('stage')} {tick.stage}: {tick.verdict}"
                + (f", {tick.action}" if tick.action else "")
            ]
            for tick, _result in points
        ]
        unit = GUARD_METRICS[metric].unit if metric in GUARD_METRICS else ""
        for name, key, colour, symbol in (
            (_("candidate"), "value", CANDIDATE, "circle"),
            (_("baseline"), "baseline", BASELINE, "square"),
        ):
            fig.add_trace(
                go.Scatter(
                    name=name,
                    legendgroup=name,
                    showlegend=row == 1,
                    x=x,
                    y=[result.get(key) for _tick, result in points],
                    mode="lines+markers",
                    line={"color": colour, "dash": "solid" if key == "value" else "dash"},
                    marker={"symbol": symbol, "size": 7},
                    customdata=notes,
                    hovertemplate=f"%{{customdata[0]}}<br>{name} %{{y:,.1f}} {unit}<extra></extra>",
                ),
                row=row,
                col=1,
            )
        fig.update_yaxes(title_text=unit, rangemode="tozero", row=row, col=1)
    fig.update_xaxes(title_text=_("Window ended at"), row=len(metrics), col=1)
    fig.update_layout(
        title={"text": _("Analysis: candidate against baseline")},
        template="plotly_white",
        hovermode="closest",
        height=220 + 200 * len(metrics),
        autosize=True,
        legend={"orientation": "h", "y": -0.15},
        margin={"l": 60, "r": 20, "t": 90, "b": 60},
    )
    return fig
