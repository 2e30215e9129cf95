"""Plotly figures as what a page needs to draw them.

The apps' `charts.py` build figures from plain data; `figure_spec` turns one into
the data a template puts in a `json_script` beside a `<div data-plotly>`
(templates/lib/_chart.html), which static/js/charts.js draws with the
plotly.js served from static/vendor. No inline script, no style attribute: the
pages keep a Content-Security-Policy without 'unsafe-inline' (an htmx swap brings
its charts the same way).
"""

from __future__ import annotations

import json
from typing import Any, TypedDict

import plotly.graph_objects as go

# Sized by the container's width; no plotly logo; no "Share chart" button, which
# would post the figure's data to plotly's cloud.
CONFIG = {"responsive": True, "displaylogo": False, "showSendToCloud": False}
# Value labels on bars shrink to their bar's width; one that would be smaller than
# this is left out (its value stays in the hover label and the table beside the
# chart). On a phone neighbouring labels would otherwise run into each other.
UNIFORM_TEXT = {"mode": "hide", "minsize": 10}


class FigureSpec(TypedDict):
    data: list[dict[str, Any]]
    layout: dict[str, Any]
    config: dict[str, Any]


def figure_spec(fig: go.Figure) -> FigureSpec:
    """The figure as JSON-ready data for `{{ spec|json_script }}`.

    Through plotly's own encoder, which writes numpy arrays as typed arrays
    ("bdata") that plotly.js decodes.
    """
    plain = json.loads(fig.to_json())
    layout = plain.get("layout", {})
    layout.setdefault("uniformtext", UNIFORM_TEXT)
    return {"data": plain.get("data", []), "layout": layout, "config": CONFIG}
