"""The figures' data, titles and units, and the table rows beside them: no database."""

from __future__ import annotations

import json

import pytest

from ledger import charts
from lib.charts import figure_spec

SLO: charts.Slo = {
    "ttft_p95_ms": 800.0,
    "ttft_p99_ms": 1500.0,
    "tpot_ms": 30.0,
    "error_rate_pct": 1.0,
}


def _point(workload, label, ttft, tpot, status="current") -> charts.LatencyPoint:
    return {
        "workload": workload,
        "label": label,
        "ttft_p50_ms": ttft[0],
        "ttft_p95_ms": ttft[1],
        "ttft_p99_ms": ttft[2],
        "tpot_p50_ms": tpot[0],
        "tpot_p95_ms": tpot[1],
        "tpot_p99_ms": tpot[2],
        "status": status,
    }


LIVE = [
    _point("short", "Short prompts", (300, 600, 900), (18, 22, 25)),
    _point("batch", "Batch", (1200, 2500, 4000), (30, 40, 55), status="stale"),
]
CANDIDATE = [
    _point("short", "Short prompts", (250, 480, 700), (17, 24.2, 26)),
    _point("streaming", "Streaming", (100, 200, 300), (10, 12, 14)),
]


def _trace(fig, name, xaxis=None):
    found = [t for t in fig.data if t.name == name and (xaxis is None or t.xaxis == xaxis)]
    assert len(found) == 1, [t.name for t in fig.data]
    return found[0]


def _axis_titles(fig) -> set[str]:
    return {
        axis.title.text
        for name in dir(fig.layout)
        if name.startswith(("xaxis", "yaxis"))
        for axis in [getattr(fig.layout, name)]
        if axis is not None and axis.title.text
    }


# ---------------------------------------------------------------- (a) latency by workload


def test_latency_chart_has_each_percentile_per_workload_and_the_slo_lines():
    fig = charts.latency_by_workload_figure(LIVE, SLO)

    assert fig.layout.title.text == "Latency by workload class"
    assert _axis_titles(fig) == {"Workload class", "TTFT (ms)", "TPOT (ms)"}
    p95_ttft = _trace(fig, "p95 TTFT")
    assert list(p95_ttft.x) == ["Short prompts", "Batch (stale)"]
    assert list(p95_ttft.y) == [600, 2500]
    assert list(_trace(fig, "p99 TPOT").y) == [25, 55]
    assert "ms" in p95_ttft.hovertemplate
    # Told apart without colour: each percentile has its own fill pattern.
    patterns = {_trace(fig, f"{p} TTFT").marker.pattern.shape for p in ("p50", "p95", "p99")}
    assert len(patterns) == 3
    lines = {(shape.y0, shape.line.dash) for shape in fig.layout.shapes}
    assert lines == {(800.0, "dash"), (1500.0, "dot"), (30.0, "dash")}
    texts = {a.text for a in fig.layout.annotations}
    assert {"SLO p95 TTFT 800 ms", "SLO p99 TTFT 1500 ms", "SLO p95 TPOT 30 ms"} <= texts


def test_latency_chart_without_slos_draws_no_lines():
    no_slo: charts.Slo = {
        "ttft_p95_ms": None,
        "ttft_p99_ms": None,
        "tpot_ms": None,
        "error_rate_pct": None,
    }

    fig = charts.latency_by_workload_figure(LIVE, no_slo)

    assert fig.layout.shapes == ()


def test_latency_rows_hold_the_same_numbers():
    rows = charts.latency_by_workload_rows(LIVE, SLO)

    assert [r["workload"] for r in rows] == ["short", "batch"]
    assert rows[1]["ttft_p95_ms"] == 2500
    assert rows[1]["status"] == "stale"
    assert rows[0]["slo_ttft_p95_ms"] == 800.0
    assert rows[0]["tpot_p99_ms"] == 25


# ---------------------------------------------------------------- (b) candidate vs live


def test_comparison_puts_live_and_candidate_side_by_side_with_deltas():
    fig = charts.comparison_figure(LIVE, CANDIDATE, live_label="live r3", candidate_label="r4")

    assert fig.layout.title.text == "Candidate vs live, per workload class"
    assert _axis_titles(fig) == {"Workload class", "p95 TTFT (ms)", "p95 TPOT (ms)"}
    live_ttft = _trace(fig, "live r3", xaxis="x")
    candidate_ttft = _trace(fig, "r4", xaxis="x")
    assert list(live_ttft.x) == ["Short prompts", "Batch", "Streaming"]
    assert list(live_ttft.y) == [600, 2500, None]
    assert list(candidate_ttft.y) == [480, None, 200]
    assert list(candidate_ttft.text) == ["-120.0 ms (-20.0%)", "—", "—"]
    assert "delta: %{customdata[1]}" in candidate_ttft.hovertemplate
    assert candidate_ttft.customdata[0][1] == "-120.0 ms (-20.0%)"
    candidate_tpot = _trace(fig, "r4", xaxis="x2")
    assert candidate_tpot.text[0] == "+2.2 ms (+10.0%)"
    assert live_ttft.marker.pattern.shape != candidate_ttft.marker.pattern.shape


def test_comparison_rows_give_the_delta_per_workload_and_metric():
    rows = charts.comparison_rows(LIVE, CANDIDATE)

    short_ttft, short_tpot = rows[0], rows[1]
    assert (short_ttft["metric"], short_ttft["live"], short_ttft["candidate"]) == (
        "p95 TTFT",
        600,
        480,
    )
    assert short_ttft["delta"] == -120
    assert short_ttft["delta_pct"] == pytest.approx(-20.0)
    assert short_tpot["delta"] == pytest.approx(2.2)
    assert [r["workload"] for r in rows] == [
        "short",
        "short",
        "batch",
        "batch",
        "streaming",
        "streaming",
    ]
    batch = rows[2]
    assert (batch["candidate"], batch["delta"], batch["delta_pct"]) == (None, None, None)


# ---------------------------------------------------------------- (c) throughput-latency


def _level(name, load, otps, ttft, tpot, within):
    return {
        "name": name,
        "load": load,
        "load_axis": "request_rate",
        "output_tokens_per_s": otps,
        "ttft_p95_ms": ttft,
        "tpot_p95_ms": tpot,
        "error_rate_pct": 0.0,
        "within_slo": within,
    }


SWEEP = [
    _level("constant@4.00", 4.0, 900.0, 2400.0, 45.0, False),
    _level("constant@1.00", 1.0, 250.0, 300.0, 20.0, True),
    _level("constant@2.00", 2.0, 480.0, 650.0, 28.0, True),
]


def test_throughput_latency_curve_plots_tokens_per_second_against_p95():
    fig = charts.throughput_latency_figure(SWEEP, SLO)

    assert fig.layout.title.text == "Throughput against latency"
    assert _axis_titles(fig) == {"Output throughput (tokens/s)", "p95 TTFT (ms)", "p95 TPOT (ms)"}
    ttft = _trace(fig, "p95 TTFT")
    tpot = _trace(fig, "p95 TPOT")
    assert list(ttft.x) == [250.0, 480.0, 900.0]  # lightest load first
    assert list(ttft.y) == [300.0, 650.0, 2400.0]
    assert list(tpot.y) == [20.0, 28.0, 45.0]
    assert list(ttft.text) == ["constant@1.00", "constant@2.00", "constant@4.00"]
    # The breached level is an x, whatever the colour; the curves differ in dash.
    assert list(ttft.marker.symbol) == ["circle", "circle", "x"]
    assert ttft.line.dash != tpot.line.dash
    assert "output tokens/s" in ttft.hovertemplate


def test_throughput_latency_curve_marks_the_two_regions():
    fig = charts.throughput_latency_figure(SWEEP, SLO)

    # Each region spans both panels (TTFT above, TPOT below).
    regions = [(s.x0, s.x1) for s in fig.layout.shapes if s.type == "rect"]
    assert sorted(regions) == [(0, 480.0), (0, 480.0), (480.0, 900.0 * 1.05), (480.0, 900.0 * 1.05)]
    texts = {a.text for a in fig.layout.annotations}
    assert {"latency-sensitive (within SLO)", "throughput-first (past SLO)"} <= texts


def test_when_every_level_is_within_slo_there_is_no_throughput_first_region():
    fig = charts.throughput_latency_figure([p for p in SWEEP if p["within_slo"]], SLO)

    regions = {(s.x0, s.x1) for s in fig.layout.shapes if s.type == "rect"}
    assert regions == {(0, 480.0)}


def test_throughput_latency_rows_name_the_region_of_each_level():
    rows = charts.throughput_latency_rows(SWEEP)

    assert [(r["level"], r["within_slo"], r["region"]) for r in rows] == [
        ("constant@1.00", "yes", "latency-sensitive"),
        ("constant@2.00", "yes", "latency-sensitive"),
        ("constant@4.00", "no", "throughput-first"),
    ]
    assert rows[1]["output_tokens_per_s"] == 480.0
    assert rows[0]["load_axis"] == "request rate (req/s)"


# ---------------------------------------------------------------- (d) TTFT CDF

CDF = [
    {
        "label": "concurrency 2",
        "points": [(100.0, 0.25), (200.0, 0.5), (400.0, 0.75), (900.0, 1.0)],
    },
    {"label": "concurrency 8", "points": [(300.0, 0.5), (1200.0, 1.0)]},
]


def test_ttft_cdf_is_a_step_curve_per_series_with_the_slo():
    fig = charts.ttft_cdf_figure(CDF, SLO)

    assert fig.layout.title.text == "Time to first token, distribution"
    assert _axis_titles(fig) == {"TTFT (ms)", "Requests at or below (%)"}
    first = _trace(fig, "concurrency 2")
    assert list(first.x) == [100.0, 200.0, 400.0, 900.0]
    assert list(first.y) == [25.0, 50.0, 75.0, 100.0]
    assert first.line.shape == "hv"
    second = _trace(fig, "concurrency 8")
    assert (first.line.dash, first.marker.symbol) != (second.line.dash, second.marker.symbol)
    assert "% of requests ≤" in first.hovertemplate
    assert any(s.x0 == 800.0 and s.line.dash == "dash" for s in fig.layout.shapes)


def test_ttft_cdf_rows_read_the_curve():
    rows = charts.ttft_cdf_rows(CDF, SLO)

    assert rows[0]["ttft_p50_ms"] == 200.0
    assert rows[0]["ttft_p95_ms"] == 900.0
    assert rows[0]["within_slo_pct"] == 75.0
    assert rows[1]["ttft_p50_ms"] == 300.0
    assert rows[1]["within_slo_pct"] == 50.0


def test_every_figure_turns_into_data_for_the_page():
    for fig in (
        charts.latency_by_workload_figure(LIVE, SLO),
        charts.comparison_figure(LIVE, CANDIDATE),
        charts.throughput_latency_figure(SWEEP, SLO),
        charts.ttft_cdf_figure(CDF, SLO),
    ):
        spec = figure_spec(charts.fit_to_page(fig))
        assert spec["data"]
        assert spec["layout"]["height"] == 460
        json.dumps(spec)  # plain JSON for json_script
