"""Reading the charts out of a page: lib/_chart.html writes each figure as JSON
just before the div that static/js/charts.js draws it into."""

from __future__ import annotations

import json
import re
from typing import Any

_CHART = re.compile(
    r'<script type="application/json">(.*?)</script><div class="plotly-chart" data-plotly></div>',
    re.S,
)


def chart_specs(html: str) -> list[dict[str, Any]]:
    """The figure of every chart in `html`, in page order."""
    return [json.loads(found) for found in _CHART.findall(html)]
