"""The daily scrape of the gateway's /metrics (beat task `scrape_gateway_metrics`): the
first scrape of a day opens its window, the first of the next day closes it and every
service the gateway counted gets its day by tenant, task type and backend; a later
scrape the same day keeps the window, a window of several days records nothing, an
unreadable gateway records nothing and keeps nothing."""

from __future__ import annotations

import contextlib
import datetime as dt
import http.server
import threading
from collections.abc import Iterator

import pytest
from django.utils import timezone

from ledger.models import RunBreakdown, RunSummary
from releases.gateway import tasks
from releases.gateway.services.gateway_day import scrape_gateway
from releases.models import GatewayMetricsScrape
from tests.releases.gateway.metrics_world import (
    as_ledger_names,
    metrics_backends,
    metrics_service,
)
from tests.releases.gateway.test_gateway_metrics import AFTER, BEFORE

pytestmark = pytest.mark.django_db


class _Metrics(http.server.BaseHTTPRequestHandler):
    status, body, key, paths = 200, b"", "", []

    def do_GET(self):
        type(self).paths.append(self.path)
        if self.headers.get("Authorization") != f"Bearer {self.key}":
            self.send_response(401)
            self.end_headers()
            return
        self.send_response(self.status)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def _gateway() -> Iterator[tuple[str, type[_Metrics]]]:
    handler = type("Handler", (_Metrics,), {"paths": [], "key": "sk-gateway-test"})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def gateway(settings):
    with _gateway() as (url, handler):
        settings.GATEWAY_URL = url
        settings.GATEWAY_API_KEY = handler.key
        settings.GATEWAY_PROMETHEUS_METRICS = True
        yield handler


@pytest.fixture
def service(team):
    return metrics_service(team)


@pytest.fixture
def backends(service):
    return metrics_backends(service)


def _yesterday_at(hour: int) -> dt.datetime:
    midnight = timezone.now().astimezone(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return midnight - dt.timedelta(days=1) + dt.timedelta(hours=hour)


def test_the_first_scrape_of_the_next_day_records_each_counted_services_day(
    gateway,
    service,
    backends,
):
    gateway.body = as_ledger_names(BEFORE, backends).encode()
    opened = scrape_gateway(now=_yesterday_at(0))
    gateway.body = as_ledger_names(AFTER, backends).encode()
    later_that_day = scrape_gateway(now=_yesterday_at(15))

    closed = scrape_gateway()

    assert (opened.status, later_that_day.status, closed.status) == ("opened", "kept", "recorded")
    # dataagent-sql is counted by the gateway but not a service of this ledger.
    assert (closed.recorded, closed.refused) == ({"kb-assistant": "recorded"}, {})
    summary = RunSummary.objects.get()
    assert (summary.date, summary.source, summary.requests) == (
        _yesterday_at(0).date(),
        "gateway",
        36,
    )
    assert summary.details["window"]["start"] == _yesterday_at(0).isoformat()
    assert RunBreakdown.objects.filter(summary=summary).count() == 5
    stored = GatewayMetricsScrape.objects.get()
    assert stored.taken_at.date() == timezone.now().date()
    assert gateway.paths == ["/metrics/"] * 3


def test_a_window_of_several_days_records_nothing(gateway, service, backends):
    gateway.body = as_ledger_names(BEFORE, backends).encode()
    scrape_gateway(now=_yesterday_at(0) - dt.timedelta(days=3))
    gateway.body = as_ledger_names(AFTER, backends).encode()

    outcome = scrape_gateway()

    assert outcome.status == "gap"
    assert not RunSummary.objects.exists()
    assert GatewayMetricsScrape.objects.get().taken_at.date() == timezone.now().date()


@pytest.mark.parametrize(
    ("status", "body", "says"),
    [
        (401, b"", "answered HTTP 401"),
        (200, b"litellm_proxy_total_requests_metric_total{ 1\n", "line 1"),
    ],
)
def test_an_unreadable_gateway_records_and_keeps_nothing(gateway, settings, status, body, says):
    gateway.body = body
    if status == 401:
        settings.GATEWAY_API_KEY = "sk-wrong"

    outcome = scrape_gateway()

    assert outcome.status == "failed"
    assert says in outcome.detail
    assert "sk-wrong" not in outcome.detail
    assert not GatewayMetricsScrape.objects.exists()


def test_without_a_gateway_or_its_metrics_the_task_does_nothing(settings):
    settings.GATEWAY_URL = ""
    assert tasks.scrape_gateway_metrics() is None
    settings.GATEWAY_URL = "http://127.0.0.1:9"
    settings.GATEWAY_PROMETHEUS_METRICS = False
    assert tasks.scrape_gateway_metrics() is None
