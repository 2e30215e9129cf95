"""Plotly figures as page fragments.

The apps' `charts.py` build figures from plain data; pages turn them into
HTML here and load plotly.js from static/ themselves (no CDN, no inline
copy of the library).
"""

from __future__ import annotations

import plotly.graph_objects as go


def figure_html(fig: go.Figure) -> str:
    """The figure as a `<div>` and its script, sized by its container's width."""
    return fig.to_html(
        full_html=False,
        include_plotlyjs=False,
        config={"responsive": True, "displaylogo": False},
        default_width="100%",
    )
