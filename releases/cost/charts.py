"""The cost trend as a chart: each day's GPU cost, the tenants' part and the idle part
stacked, the day's cost per million output tokens as a line on its own axis, and a
dotted line at each marker (a release that reached 100 %, a served revision changing).
Pure: from a `CostReport`."""

from __future__ import annotations

import plotly.graph_objects as go
from django.utils.translation import gettext as _

from releases.cost.report import CostReport

# Okabe-Ito, as the other charts: used blue, idle grey, releases orange, the cost per
# million output tokens (its own axis, on the right) vermillion.
USED, IDLE_COLOUR, RELEASE, PER_MILLION = "#0072B2", "#999999", "#E69F00", "#D55E00"


def cost_figure(report: CostReport) -> go.Figure | None:
    """None when no day was priced."""
    days = report.days
    if not days:
        return None
    x = [day.date.isoformat() for day in days]
    fig = go.Figure()
    for name, values, colour in (
        (_("tenants"), [float(day.used) for day in days], USED),
        (_("idle capacity"), [float(day.idle) for day in days], IDLE_COLOUR),
    ):
        fig.add_trace(
            go.Bar(
                name=name,
                x=x,
                y=values,
                marker={"color": colour},
                hovertemplate=f"%{{x}}<br>{name}: %{{y:,.2f}} {report.currency}<extra></extra>",
            )
        )
    per_million = [
        float((day.used + day.idle) * 1_000_000 / day.output_tokens) if day.output_tokens else None
        for day in days
    ]
    if any(value is not None for value in per_million):
        name = _("per million output tokens")
        fig.add_trace(
            go.Scatter(
                name=name,
                x=x,
                y=per_million,
                yaxis="y2",
                mode="lines+markers",
                line={"color": PER_MILLION},
                hovertemplate=f"%{{x}}<br>{name}: %{{y:,.2f}} {report.currency}<extra></extra>",
            )
        )
    for marker in report.markers:
        fig.add_vline(x=marker.date.isoformat(), line={"color": RELEASE, "dash": "dot"})
        fig.add_annotation(
            x=marker.date.isoformat(),
            y=1,
            yref="paper",
            text=marker.label,
            showarrow=False,
            textangle=-90,
            xanchor="right",
            yanchor="top",
            font={"size": 10, "color": RELEASE},
        )
    fig.update_layout(
        barmode="stack",
        margin={"l": 50, "r": 10, "t": 10, "b": 40},
        legend={"orientation": "h", "y": -0.2},
        yaxis={"title": {"text": report.currency}, "rangemode": "tozero"},
        yaxis2={
            "title": {
                "text": _("%(currency)s per million output tokens") % {"currency": report.currency}
            },
            "overlaying": "y",
            "side": "right",
            "rangemode": "tozero",
            "showgrid": False,
        },
        xaxis={"type": "date"},
        height=320,
    )
    return fig
