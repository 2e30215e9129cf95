"""The cost trend as a chart: each day's GPU cost, the tenants' part and the idle part
stacked, with a line at each release that reached 100 %. Pure: from a `CostReport`."""

from __future__ import annotations

import plotly.graph_objects as go
from django.utils.translation import gettext as _

from releases.cost.report import CostReport

# Okabe-Ito, as the other charts: used blue, idle grey, releases orange.
USED, IDLE_COLOUR, RELEASE = "#0072B2", "#999999", "#E69F00"


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
        xaxis={"type": "date"},
        height=320,
    )
    return fig
