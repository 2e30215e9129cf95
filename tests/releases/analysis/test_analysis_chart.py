"""The analysis timeline's chart: the candidate beside the baseline per measured metric."""

from __future__ import annotations

import datetime as dt

from releases.governance.charts import analysis_figure
from releases.governance.queries.analysis import Tick

START = dt.datetime(2026, 12, 6, 12, 0, tzinfo=dt.UTC)


def _tick(n: int, candidate: float | None, baseline: float | None, verdict: str, action: str = ""):
    guards = (
        []
        if candidate is None
        else [{"metric": "ttft_p95_ms", "value": candidate, "baseline": baseline, "status": "pass"}]
    )
    end = START + dt.timedelta(seconds=10 * n)
    return Tick(1, end - dt.timedelta(seconds=10), end, verdict, "", guards, action)


def test_each_measured_metric_draws_the_candidate_beside_the_baseline():
    ticks = [_tick(1, 210.0, 200.0, "pass"), _tick(2, 640.0, 205.0, "fail", "rollback")]

    figure = analysis_figure(ticks)

    assert figure is not None
    candidate, baseline = figure.data
    assert (candidate.name, list(candidate.y)) == ("candidate", [210.0, 640.0])
    assert (baseline.name, list(baseline.y)) == ("baseline", [200.0, 205.0])
    assert list(candidate.customdata[1]) == ["stage 1: fail, rollback"]


def test_nothing_measured_draws_nothing():
    assert analysis_figure([_tick(1, None, None, "error")]) is None
