"""The ledger's own metrics, in Prometheus' exposition format (prometheus_client).

Every metric object lives here, so that the apps that move them (the chain, replay,
the request middleware, the Celery signals) import `lib` only. Label values come
from code, never from a request: a view name, a task name, an event action, an
outcome word. Nothing a client sends becomes a label.

Processes: under gunicorn (several worker processes) and in a prefork Celery worker,
PROMETHEUS_MULTIPROC_DIR names a folder, empty at start, where each process writes
its values; the scrape adds them up (prometheus_client's multiprocess mode).
Without it each process counts in its own registry (runserver, a solo worker).

Web: GET /metrics (config/metrics.py) serves the counters and histograms of every
web process, and the gauges of work in the database (`register_gauges`), computed
at scrape time. Workers: `start_worker_exporter` serves their counters on
WORKER_METRICS_PORT (config/celery.py starts it). Both answer loopback clients that
came through no proxy (unless METRICS_LOOPBACK_WITHOUT_TOKEN is false), and others
only with `Authorization: Bearer $METRICS_TOKEN` (`may_scrape`).
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from django.http import HttpRequest, HttpResponse
from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST, ThreadingWSGIServer
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

log = logging.getLogger(__name__)

# -- what is counted ---------------------------------------------------------------

# Latency buckets from a 5 ms page to a 30 s export request.
_REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
# Tasks run from milliseconds (a probe) to hours (a replay of a large set).
_TASK_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600, 6 * 3600)

HTTP_REQUESTS = Counter(
    "ledger_http_requests",
    "HTTP requests answered, by view name, method and status code.",
    ["view", "method", "status"],
)
HTTP_LATENCY = Histogram(
    "ledger_http_request_duration_seconds",
    "Time from the request reaching Django to its response, by view name and status code.",
    ["view", "status"],
    buckets=_REQUEST_BUCKETS,
)
TASKS = Counter(
    "ledger_celery_tasks",
    "Celery tasks that ended, by task name and final state (SUCCESS, FAILURE, RETRY, …).",
    ["task", "state"],
)
TASK_FAILURES = Counter(
    "ledger_celery_task_failures",
    "Celery tasks that raised, by task name.",
    ["task"],
)
TASK_DURATION = Histogram(
    "ledger_celery_task_duration_seconds",
    "Run time of Celery tasks, by task name.",
    ["task"],
    buckets=_TASK_BUCKETS,
)
OTLP_SPANS = Counter(
    "ledger_otlp_spans",
    "Spans received on /api/otlp/v1/traces, by outcome: stored (a model call), rejected "
    "(a model call whose facts did not hold) or not_a_model_call (skipped).",
    ["outcome"],
)
OTLP_CONTENT_DROPPED = Counter(
    "ledger_otlp_content_dropped",
    "Prompt and completion content dropped at trace ingest: attributes and span events.",
)
CHAIN_APPENDS = Counter(
    "ledger_chain_appends",
    "Events appended to the ledger chain and committed, by action.",
    ["action"],
)
VERIFICATIONS = Counter(
    "ledger_verifications",
    "Runs of verify_ledger (the chain recomputed and checked against its checkpoint), by result.",
    ["result"],
)
LAST_VERIFICATION = Gauge(
    "ledger_last_verification_timestamp_seconds",
    "When verify_ledger last ran with each result (Unix time).",
    ["result"],
    multiprocess_mode="max",
)
REPLAY_RUNS = Counter(
    "ledger_replay_runs",
    "Replay runs that ended, by outcome (passed, failed, regressed, errored: the verdict; "
    "run_failed: the run could not be carried out).",
    ["outcome"],
)
ANALYSIS_TICKS = Counter(
    "ledger_analysis_ticks",
    "Gray stages measured by the rollout analysis, by the observation's verdict "
    "(pass, fail, inconclusive, error).",
    ["verdict"],
)
ANALYSIS_ERRORS = Counter(
    "ledger_analysis_errors",
    "Analysis measurements that failed (Prometheus unreachable, a query error, no samples).",
)
ANALYSIS_ACTIONS = Counter(
    "ledger_analysis_actions",
    "What the rollout analysis did by itself, by action (promote, rollback, hold, stop).",
    ["action"],
)

# Methods outside this set are counted as "other": the method is the client's text.
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
UNRESOLVED_VIEW = "(unresolved)"


def view_label(request: HttpRequest) -> str:
    """The resolved view's name (`ledger:service_detail`), or one word for URLs no route matched."""
    match = request.resolver_match
    if match is None:
        return UNRESOLVED_VIEW
    return match.view_name or match._func_path


def method_label(method: str | None) -> str:
    return method if method in _METHODS else "other"


class RequestMetricsMiddleware:
    """Counts and times every response. Early in MIDDLEWARE: its time includes the others'."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        view, status = view_label(request), str(response.status_code)
        HTTP_REQUESTS.labels(view=view, method=method_label(request.method), status=status).inc()
        HTTP_LATENCY.labels(view=view, status=status).observe(time.perf_counter() - started)
        return response


# -- Celery: connected in config/celery.py ------------------------------------------------

_task_started: dict[str, float] = {}


def on_task_prerun(task_id: str | None = None, **kwargs: Any) -> None:
    if task_id:
        _task_started[task_id] = time.perf_counter()


def on_task_postrun(
    task_id: str | None = None, task: Any = None, state: str | None = None, **kwargs: Any
) -> None:
    name = getattr(task, "name", None) or "unknown"
    TASKS.labels(task=name, state=state or "UNKNOWN").inc()
    started = _task_started.pop(task_id or "", None)
    if started is not None:
        TASK_DURATION.labels(task=name).observe(time.perf_counter() - started)


def on_task_failure(sender: Any = None, **kwargs: Any) -> None:
    TASK_FAILURES.labels(task=getattr(sender, "name", None) or "unknown").inc()


# -- gauges of work in the database, computed at scrape time -----------------------------

GaugeSource = Callable[[], Mapping[str, int]]
_gauge_sources: dict[str, GaugeSource] = {}
# The words a source may answer with: still to be done, past its due time, past a
# hard limit (an SLO, a policy's age limit).
WORK_STATES = ("open", "overdue", "breached")


def register_gauges(kind: str, source: GaugeSource) -> None:
    """Add a kind of work to the `ledger_work_items` gauge (an app's `AppConfig.ready`).

    `source()` queries the database and answers counts by state, a subset of
    WORK_STATES ({"open": 3, "overdue": 1}); the states it leaves out are not
    reported for that kind (not every kind can be breached). Replay's runs and the
    ledger's evidence register now; releases, reviews and rollouts join the same way
    as their app lands.
    """
    _gauge_sources[kind] = source


class WorkItemsCollector(Collector):
    """`ledger_work_items{kind, state}` from every registered source, one query each.

    A source that fails is reported in `ledger_work_items_errors{kind}`, and the
    scrape still answers with the others.
    """

    def collect(self) -> Iterator[Metric]:
        items = GaugeMetricFamily(
            "ledger_work_items",
            "Items of work by kind and state (open, overdue, breached), read from the "
            "database at scrape time.",
            labels=["kind", "state"],
        )
        errors = GaugeMetricFamily(
            "ledger_work_items_errors",
            "1 when the count of a kind of work could not be read at this scrape.",
            labels=["kind"],
        )
        for kind, source in sorted(_gauge_sources.items()):
            try:
                counts = source()
            except Exception:
                log.exception("metrics: counting %s failed", kind)
                errors.add_metric([kind], 1)
                continue
            errors.add_metric([kind], 0)
            for state in WORK_STATES:
                if state in counts:
                    items.add_metric([kind, state], counts[state])
        yield items
        yield errors


class _Together(Collector):
    """Several collectors read as one registry (generate_latest takes any collector)."""

    def __init__(self, parts: Iterable[Collector]) -> None:
        self.parts = list(parts)

    def collect(self) -> Iterator[Metric]:
        for part in self.parts:
            yield from part.collect()


def multiprocess_dir() -> str | None:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


def process_metrics() -> Collector:
    """What this process's scrape reports of the counters: every process's values in
    multiprocess mode, this process's own registry otherwise."""
    if multiprocess_dir():
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return registry
    return REGISTRY


def exposition(*, with_gauges: bool) -> bytes:
    parts: list[Collector] = [process_metrics()]
    if with_gauges:
        parts.append(WorkItemsCollector())
    return generate_latest(_Together(parts))


# -- who may scrape -----------------------------------------------------------------------


FORBIDDEN_TEXT = (
    "Metrics answer Authorization: Bearer <METRICS_TOKEN>, and loopback clients not "
    "behind a proxy unless METRICS_LOOPBACK_WITHOUT_TOKEN is false.\n"
)
# Headers a proxy adds to what it forwards: RFC 7239's Forwarded, Via, the de facto
# X-Forwarded-* family (For, Host, Proto, Port, Server, Prefix: a proxy may set only
# one of them), X-Real-IP, and the client-address headers of CDNs and load balancers.
# A direct scraper sends none of them; any one, even alone, means a proxy.
PROXY_HEADER_PREFIX = "HTTP_X_FORWARDED_"
PROXY_HEADERS = frozenset(
    {
        "HTTP_FORWARDED",
        "HTTP_VIA",
        "HTTP_X_REAL_IP",
        "HTTP_X_CLIENT_IP",
        "HTTP_X_CLUSTER_CLIENT_IP",
        "HTTP_TRUE_CLIENT_IP",
        "HTTP_CF_CONNECTING_IP",
        "HTTP_FASTLY_CLIENT_IP",
    }
)


def came_through_proxy(environ: Mapping[str, Any]) -> bool:
    """Whether a request (its WSGI environ, or a Django request's META) carries a
    header that a proxy adds."""
    return any(key in PROXY_HEADERS or key.startswith(PROXY_HEADER_PREFIX) for key in environ)


def may_scrape(environ: Mapping[str, Any], token: str, *, loopback_without_token: bool) -> bool:
    """The bearer of METRICS_TOKEN (compared in constant time), or a loopback client
    while `loopback_without_token` (METRICS_LOOPBACK_WITHOUT_TOKEN) holds.

    A request a proxy forwarded comes from the proxy's address, loopback when the
    proxy runs on the same machine: one carrying any proxy header needs the token. A
    proxy that adds none cannot be told from a local scraper; turning the exemption
    off covers it.
    """
    authorization = environ.get("HTTP_AUTHORIZATION")
    if authorization and token:
        scheme, _, offered = authorization.partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(
            offered.strip().encode(), token.encode()
        ):
            return True
    if not loopback_without_token or came_through_proxy(environ):
        return False
    try:
        return ipaddress.ip_address(environ.get("REMOTE_ADDR") or "").is_loopback
    except ValueError:
        return False


# -- the workers' exporter ----------------------------------------------------------------


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are not logged: one line every few seconds says nothing."""


def worker_metrics_app(token: str, *, loopback_without_token: bool = True) -> Callable:
    """A WSGI app answering the worker's counters, with the same rule as the web's /metrics."""

    def app(environ: dict[str, Any], start_response: Callable) -> list[bytes]:
        if not may_scrape(environ, token, loopback_without_token=loopback_without_token):
            start_response("403 Forbidden", [("Content-Type", "text/plain; charset=utf-8")])
            return [FORBIDDEN_TEXT.encode()]
        if environ.get("REQUEST_METHOD") != "GET":
            start_response("405 Method Not Allowed", [("Allow", "GET")])
            return [b""]
        start_response("200 OK", [("Content-Type", CONTENT_TYPE_LATEST)])
        return [exposition(with_gauges=False)]

    return app


def start_worker_exporter(
    host: str, port: int, token: str, *, loopback_without_token: bool = True
) -> ThreadingWSGIServer | None:
    """Serve the worker's counters on host:port from a daemon thread.

    A port already taken (a second worker on the same machine) is logged, not fatal:
    the worker's tasks matter more than its metrics.
    """
    try:
        server = make_server(
            host,
            port,
            worker_metrics_app(token, loopback_without_token=loopback_without_token),
            ThreadingWSGIServer,
            handler_class=_QuietHandler,
        )
    except OSError as error:
        log.error("metrics: cannot listen on %s:%s (%s); worker metrics are off", host, port, error)
        return None
    threading.Thread(target=server.serve_forever, name="metrics-exporter", daemon=True).start()
    log.info("metrics: worker exporter listening on %s:%s", host, server.server_port)
    return server
