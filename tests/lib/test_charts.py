"""lib.charts: a figure becomes plain JSON data that a page draws without inline script."""

from __future__ import annotations

import json

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
