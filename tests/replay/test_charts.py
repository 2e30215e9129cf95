"""Replay charts: plain data in, a plotly Figure out. No database."""

from __future__ import annotations

import datetime as dt

from replay import charts

T0 = dt.datetime(2025, 3, 1, 12, 0, tzinfo=dt.UTC)


def point(run, hours, rate, ttft50, ttft95, tpot50, tpot95, verdict="passed"):
    return {
        "run": run,
        "sample_set": "kb-smoke@2",
        "finished_at": T0 + dt.timedelta(hours=hours),
        "verdict": verdict,
        "pass_rate": rate,
        "ttft_p50_ms": ttft50,
        "ttft_p95_ms": ttft95,
        "tpot_p50_ms": tpot50,
        "tpot_p95_ms": tpot95,
    }


TREND = [
    # Given newest first: the chart and the table put them oldest first.
    point(12, 2, 0.75, 210.0, 480.0, 21.0, 40.0, verdict="regressed"),
    point(11, 1, 1.0, 100.0, 150.0, 10.0, 14.0),
]


def test_trend_rows_are_oldest_first_with_pass_rate_in_percent():
    rows = charts.trend_rows(TREND)

    assert [row["run_id"] for row in rows] == [11, 12]
    assert [row["pass_rate_pct"] for row in rows] == [100.0, 75.0]
    assert rows[1]["ttft_p95_ms"] == 480.0
    assert rows[1]["verdict"] == "regressed"


def test_trend_figure_has_pass_rate_ttft_and_tpot_series_over_time():
    fig = charts.trend_figure(TREND, title="kb-vllm: last 2 finished runs")

    names = [trace.name for trace in fig.data]
    assert names == ["pass rate", "TTFT p50", "TTFT p95", "TPOT p50", "TPOT p95"]
    by_name = {trace.name: trace for trace in fig.data}
    assert list(by_name["pass rate"].y) == [100.0, 75.0]
    assert list(by_name["TTFT p95"].y) == [150.0, 480.0]
    assert list(by_name["TPOT p50"].y) == [10.0, 21.0]
    assert list(by_name["TTFT p50"].x) == ["2025-03-01T13:00:00+00:00", "2025-03-01T14:00:00+00:00"]
    assert fig.layout.title.text == "kb-vllm: last 2 finished runs"


def test_trend_figure_titles_its_axes_with_units():
    fig = charts.trend_figure(TREND)

    assert fig.layout.yaxis.title.text == "Pass rate (%)"
    assert fig.layout.yaxis2.title.text == "TTFT (ms)"
    assert fig.layout.yaxis3.title.text == "TPOT (ms)"
    assert fig.layout.xaxis3.title.text == "Run finished at"
    subplot_titles = [a.text for a in fig.layout.annotations]
    assert subplot_titles == ["Pass rate", "Time to first token", "Time per output token"]


def test_trend_series_read_without_colour():
    fig = charts.trend_figure(TREND)
    by_name = {trace.name: trace for trace in fig.data}

    # p50 and p95 differ by dash and marker, not only colour.
    assert by_name["TTFT p50"].line.dash != by_name["TTFT p95"].line.dash
    assert by_name["TTFT p50"].marker.symbol != by_name["TTFT p95"].marker.symbol


def test_trend_hover_names_the_run_its_set_and_verdict():
    fig = charts.trend_figure(TREND)

    assert fig.data[0].customdata[1][0] == "run 12 (kb-smoke@2, regressed)"
    assert "%" in fig.data[0].hovertemplate
    assert "ms" in fig.data[1].hovertemplate


def test_trend_with_missing_numbers_keeps_the_gaps():
    fig = charts.trend_figure([point(1, 0, None, None, None, None, None)])

    assert list(fig.data[0].y) == [None]
    assert (
        charts.trend_rows([point(1, 0, None, None, None, None, None)])[0]["pass_rate_pct"] is None
    )


# ---------------------------------------------------------------- two runs

SAMPLES = [
    {"key": "capital-fr", "category": "short_qa", "a": 1.0, "b": 1.0},
    {"key": "order-json", "category": "structured_json", "a": 1.0, "b": 0.4},
    {"key": "new-in-b", "category": "refusal", "a": None, "b": 1.0},
]


def test_pass_rate_rows_mark_what_got_worse():
    rows = charts.pass_rate_comparison_rows(SAMPLES)

    assert [(r["key"], r["a_pct"], r["b_pct"], r["delta_points"], r["worse"]) for r in rows] == [
        ("capital-fr", 100.0, 100.0, 0.0, False),
        ("order-json", 100.0, 40.0, -60.0, True),
        ("new-in-b", None, 100.0, None, False),
    ]


def test_pass_rate_figure_puts_both_runs_side_by_side_per_sample():
    fig = charts.pass_rate_comparison_figure(
        SAMPLES, label_a="run 3 · live", label_b="run 4 · canary"
    )

    assert [t.name for t in fig.data] == ["run 3 · live", "run 4 · canary"]
    assert list(fig.data[0].y) == ["capital-fr", "order-json", "new-in-b"]
    assert list(fig.data[1].x) == [100.0, 40.0, 100.0]
    assert fig.data[0].orientation == "h"
    assert fig.data[0].marker.pattern.shape != fig.data[1].marker.pattern.shape
    assert fig.layout.xaxis.title.text == "Pass rate (%)"
    assert fig.layout.title.text == "Pass rate per sample"


LATENCY = [
    {"metric": "p50 TTFT", "a": 100.0, "b": 110.0},
    {"metric": "p95 TTFT", "a": 200.0, "b": 300.0},
    {"metric": "p95 TPOT", "a": None, "b": 12.0},
]


def test_latency_rows_give_the_change_in_ms_and_percent():
    rows = charts.latency_comparison_rows(LATENCY)

    assert [(r["metric"], r["delta"], r["delta_pct"]) for r in rows] == [
        ("p50 TTFT", 10.0, 10.0),
        ("p95 TTFT", 100.0, 50.0),
        ("p95 TPOT", None, None),
    ]
    assert {r["unit"] for r in rows} == {"ms"}


def test_latency_figure_labels_b_bars_with_their_change():
    fig = charts.latency_comparison_figure(LATENCY, label_a="A", label_b="B")

    assert list(fig.data[0].y) == [100.0, 200.0, None]
    assert list(fig.data[1].text) == ["+10.0 ms (+10.0%)", "+100.0 ms (+50.0%)", "—"]
    assert fig.layout.yaxis.title.text == "Latency (ms)"
    assert fig.layout.xaxis.title.text == "Percentile"
