"""The service's daily trend: p95 TTFT and error rate per day against the SLO lines,
with what changed the service (a new live revision; releases, rollbacks and waivers
once `releases` registers them) drawn across both.

Pure functions from `ledger.queries.run_trend`'s plain data to a plotly Figure,
tested without the database. The series differ by marker and dash as well as
colour, and a day over its SLO is drawn hollow-red *and* listed in the table
beside the chart, so the chart reads in greyscale.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypedDict

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ledger.charts import COLOURS

if TYPE_CHECKING:
    from ledger.queries.run_evidence import Trend

# A line per kind of change, told apart by dash as well as colour.
MARKER_STYLES = {
    "live revision": ("#000000", "dash"),
    "served revision": ("#56B4E9", "dot"),
    "release": ("#0072B2", "dot"),
    "rollback": ("#D55E00", "dashdot"),
    "waiver": ("#CC79A7", "longdash"),
}


class TrendRow(TypedDict):
    date: dt.date
    source: str
    revision: str | None
    requests: int | None
    ttft_p95_ms: float | None
    error_rate_pct: float | None
    ttft_breached: bool
    error_breached: bool
    changes: list[str]


def trend_rows(trend: Trend) -> list[TrendRow]:
    """Newest day first, with the changes of each day beside its numbers."""
    changes: dict[dt.date, list[str]] = {}
    for marker in trend["markers"]:
        changes.setdefault(marker["date"], []).append(marker["label"])
    return [
        {**point, "changes": changes.get(point["date"], [])} for point in reversed(trend["points"])
    ]


def _slo_line(fig: go.Figure, value: float | None, text: str, row: int) -> None:
    if value is None:
        return
    fig.add_hline(
        y=value,
        line_dash="dash",
        line_color="#444444",
        line_width=1.5,
        annotation_text=text,
        annotation_position="top left",
        row=row,
        col=1,
    )


def _series(
    dates: Sequence[dt.date],
    values: Sequence[float | None],
    breached: Sequence[bool],
    *,
    name: str,
    unit: str,
    colour: str,
    symbol: str,
) -> go.Scatter:
    return go.Scatter(
        x=list(dates),
        y=list(values),
        name=name,
        mode="lines+markers",
        connectgaps=False,
        line={"color": colour, "width": 2},
        marker={
            "symbol": [f"{symbol}-open" if over else symbol for over in breached],
            "size": [10 if over else 6 for over in breached],
            "color": ["#D55E00" if over else colour for over in breached],
            "line": {"width": 2},
        },
        hovertemplate=f"%{{x|%Y-%m-%d}}<br>{name}: %{{y:,.2f}} {unit}<extra></extra>",
    )


def trend_figure(trend: Trend) -> go.Figure:
    """Two panels on one day axis: p95 TTFT (ms) above, error rate (%) below."""
    points = trend["points"]
    dates = [p["date"] for p in points]
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.12,
        subplot_titles=("p95 time to first token", "Error rate"),
    )
    fig.add_trace(
        _series(
            dates,
            [p["ttft_p95_ms"] for p in points],
            [p["ttft_breached"] for p in points],
            name="p95 TTFT",
            unit="ms",
            colour=COLOURS[0],
            symbol="circle",
        ),
        row=1,
        col=1,
    )
    fig.add_trace(
        _series(
            dates,
            [p["error_rate_pct"] for p in points],
            [p["error_breached"] for p in points],
            name="error rate",
            unit="%",
            colour=COLOURS[2],
            symbol="square",
        ),
        row=2,
        col=1,
    )
    slo_ttft, slo_error = trend["slo_ttft_p95_ms"], trend["slo_error_rate_pct"]
    _slo_line(fig, slo_ttft, f"SLO p95 TTFT {slo_ttft:g} ms" if slo_ttft else "", 1)
    _slo_line(fig, slo_error, f"SLO error rate {slo_error:g} %" if slo_error else "", 2)
    for marker in trend["markers"]:
        colour, dash = MARKER_STYLES.get(marker["kind"], ("#444444", "dot"))
        # A shape and an annotation, not add_vline: plotly cannot annotate a vline on a
        # date axis.
        fig.add_shape(
            type="line",
            xref="x",
            yref="paper",
            x0=marker["date"],
            x1=marker["date"],
            y0=0,
            y1=1,
            line={"color": colour, "dash": dash, "width": 1.5},
        )
        fig.add_annotation(
            x=marker["date"],
            xref="x",
            yref="paper",
            y=1.0,
            yanchor="bottom",
            text=marker["label"],
            showarrow=False,
            textangle=-30,
            font={"size": 11, "color": colour},
        )
    fig.update_xaxes(
        range=[trend["start"] - dt.timedelta(hours=12), trend["end"] + dt.timedelta(hours=12)],
        type="date",
        tickformat="%m-%d",
    )
    fig.update_xaxes(title_text="day (UTC)", row=2, col=1)
    fig.update_yaxes(title_text="ms", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text="%", rangemode="tozero", row=2, col=1)
    fig.update_layout(
        title={"text": "Daily run evidence against the SLOs"},
        template="plotly_white",
        hovermode="x unified",
        showlegend=False,
        height=520,
        margin={"l": 60, "r": 20, "t": 110, "b": 50},
    )
    return fig
