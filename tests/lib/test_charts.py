"""lib.charts: a figure becomes plain JSON data that a page draws without inline script."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
from django.template.loader import render_to_string

from lib.charts import figure_spec


def test_a_figure_becomes_json_data_with_the_pages_config():
    fig = go.Figure(go.Bar(x=["a", "b"], y=np.array([1.5, 2.5]), name="p95 TTFT"))
    fig.update_layout(height=320)

    spec = figure_spec(fig)

    assert set(spec) == {"data", "layout", "config"}
    assert spec["data"][0]["type"] == "bar"
    assert spec["layout"]["height"] == 320
    # Sized by the page, no logo, no "Share chart" button posting the data to plotly's cloud.
    assert spec["config"] == {"responsive": True, "displaylogo": False, "showSendToCloud": False}
    text = json.dumps(spec)
    assert len(text) < 50_000  # the figure, not the library
    assert "<script" not in text


def test_the_chart_fragment_is_json_beside_the_div_the_script_draws_into():
    fig = go.Figure(go.Scatter(x=[1, 2], y=[3, 4], name="</script><script>alert(1)</script>"))

    html = render_to_string("lib/_chart.html", {"spec": figure_spec(fig)})

    assert html.startswith('<script type="application/json">')
    assert html.strip().endswith('</script><div class="plotly-chart" data-plotly></div>')
    # json_script escapes what would close the element early.
    assert html.count("</script>") == 1
    assert "\\u003C/script\\u003E" in html
    assert "style=" not in html


def test_bar_labels_that_would_shrink_below_reading_size_are_left_out():
    """On a phone a bar is narrow: its label goes rather than shrink into its neighbours
    (the value stays in the hover label and the table beside the chart)."""
    fig = go.Figure(go.Bar(x=["a"], y=[1], text=["1"], textposition="outside"))

    assert figure_spec(fig)["layout"]["uniformtext"] == {"mode": "hide", "minsize": 10}


def test_a_figure_s_own_uniform_text_is_kept():
    fig = go.Figure(go.Bar(x=["a"], y=[1])).update_layout(uniformtext={"mode": "show"})

    assert figure_spec(fig)["layout"]["uniformtext"] == {"mode": "show"}


# plotly.js's basic bundle (templates/lib/_plotly_head.html) draws these trace types only.
BASIC_BUNDLE_TRACES = {"Scatter", "Bar", "Pie"}


def test_every_chart_uses_a_trace_type_the_served_plotly_bundle_draws():
    root = Path(__file__).resolve().parents[2]
    used = set()
    for module in ("ledger/charts.py", "replay/charts.py", "releases/charts.py"):
        path = root / module
        if path.exists():
            used |= set(re.findall(r"\bgo\.([A-Z]\w+)\(", path.read_text())) - {"Figure"}

    assert used, "the scan found the charts' traces"
    assert used <= BASIC_BUNDLE_TRACES, (
        f"not in plotly.js's basic bundle: {used - BASIC_BUNDLE_TRACES}"
    )
    head = (root / "templates" / "lib" / "_plotly_head.html").read_text()
    assert "vendor/plotly-basic-" in head
