"""The service's trend: p95 TTFT and error rate per day against the SLOs, what changed
marked on the day axis; the query, the figure, and the service page that shows both."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from ledger import queries, services, trend_charts
from ledger.queries.run_evidence import _MARKER_SOURCES, register_trend_markers
from lib.charts import figure_spec
from tests.ledger.factories import RevisionFactory
from tests.ledger.run_evidence.conftest import day
from tests.support.charts import chart_specs

pytestmark = pytest.mark.django_db

TODAY = timezone.now().astimezone(dt.UTC).date()


def _days_ago(n: int) -> dt.date:
    return TODAY - dt.timedelta(days=n)


def _record(service, n: int, **fields) -> None:
    services.record_run_summary(service, actor=None, date=_days_ago(n), **day(**fields))


def test_the_trend_holds_each_day_once_preferring_the_gateway(service, live):
    _record(service, 3, ttft_p95_ms=600.0)
    _record(service, 2, ttft_p95_ms=900.0, ttft_p99_ms=1400.0)  # over the 800 ms SLO
    services.record_run_summary(
        service, actor=None, date=_days_ago(2), source="scrape", requests=None, ttft_p95_ms=10.0
    )
    services.record_run_summary(
        service, actor=None, date=_days_ago(1), source="scrape", requests=None, ttft_p95_ms=700.0
    )
    _record(service, 90)  # outside the 60 days

    trend = queries.run_trend(service)

    assert [(p["date"], p["source"], p["ttft_p95_ms"]) for p in trend["points"]] == [
        (_days_ago(3), "gateway", 600.0),
        (_days_ago(2), "gateway", 900.0),
        (_days_ago(1), "scrape", 700.0),
    ]
    assert [p["ttft_breached"] for p in trend["points"]] == [False, True, False]
    # 36 failed of 12,000: 0.3 %, under the 1 % SLO.
    assert trend["points"][0]["error_rate_pct"] == pytest.approx(0.3)
    assert trend["points"][0]["revision"] == live.label
    assert (trend["slo_ttft_p95_ms"], trend["slo_error_rate_pct"]) == (800.0, 1.0)
    assert trend["start"] == _days_ago(60) and trend["end"] == TODAY


def test_a_change_of_the_live_revision_is_marked_on_its_day(service, live):
    _record(service, 1)
    newer = RevisionFactory(service=service)
    services.set_live_revision(service, newer, actor=None, reason="release")

    markers = queries.run_trend(service)["markers"]

    assert {"date": TODAY, "kind": "live revision", "label": f"{newer.label} live"} in markers


def test_other_apps_add_their_markers_through_the_hook(service, live):
    def releases(service, start, end):
        return [{"date": end, "kind": "rollback", "label": "rolled back to r1"}]

    register_trend_markers(releases)
    try:
        trend = queries.run_trend(service)
    finally:
        _MARKER_SOURCES.remove(releases)

    assert {"date": TODAY, "kind": "rollback", "label": "rolled back to r1"} in trend["markers"]


def test_the_trend_reads_in_a_constant_number_of_queries(service, live, django_assert_num_queries):
    for n in range(1, 40):
        _record(service, n)

    # The days; the live-revision events (and their revisions' numbers when there are any).
    with django_assert_num_queries(3):
        trend = queries.run_trend(service)
    assert len(trend["points"]) == 39


def test_the_figure_draws_both_panels_the_slo_lines_and_the_markers(service, live):
    _record(service, 2, ttft_p95_ms=900.0, ttft_p99_ms=1400.0)
    _record(service, 1)
    trend = queries.run_trend(service)

    spec = figure_spec(trend_charts.trend_figure(trend))

    ttft, errors = spec["data"]
    assert ttft["name"] == "p95 TTFT" and errors["name"] == "error rate"
    assert ttft["x"] == [_days_ago(2).isoformat(), _days_ago(1).isoformat()]
    # The breached day is hollow, not only red.
    assert ttft["marker"]["symbol"] == ["circle-open", "circle"]
    texts = [a["text"] for a in spec["layout"]["annotations"]]
    assert "SLO p95 TTFT 800 ms" in texts and "SLO error rate 1 %" in texts
    assert f"{live.label} live" in texts
    lines = [s for s in spec["layout"]["shapes"] if s.get("yref") == "paper"]
    assert len(lines) == len(trend["markers"])


def test_the_service_page_shows_the_trend_beside_a_table_of_the_same_days(
    client, sre, service, live
):
    _record(service, 2, ttft_p95_ms=900.0, ttft_p99_ms=1400.0)
    _record(service, 1)
    client.force_login(sre)

    page = client.get("/services/kb-assistant/").content.decode()

    assert "Daily run evidence" in page
    figures = [s for s in chart_specs(page) if "p95 time to first token" in str(s["layout"])]
    assert len(figures) == 1
    assert f'<time datetime="{_days_ago(2).isoformat()}">' in page
    assert '<span class="badge bad">breached</span>' in page
    assert "vendor/plotly-basic-" in page


def test_without_run_evidence_the_page_says_how_it_arrives(client, sre, service):
    client.force_login(sre)

    page = client.get("/services/kb-assistant/").content.decode()

    assert "No run evidence in the last 60 days" in page
    assert "/api/services/kb-assistant/run-summaries/" in page
