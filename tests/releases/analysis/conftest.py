"""Two fake engines and a real Prometheus scraping them, once per test session (issue 30).

Rollout analysis judges a canary from the engines' own metrics as Prometheus reports
them. Here the engines are fake OpenAI servers in their own processes, serving
vLLM-named series at /metrics (tests/support/engine_metrics.py), and the latency they
report is what a test sets with ``engine.traffic(rps=…, ttft_ms=…, error_pct=…)``.
Prometheus (Debian's, `make prometheus`) scrapes both every second on a free loopback
port. Under pytest-xdist each worker that runs one of these tests starts its own set:
session fixtures are per worker, and nothing here is shared across processes.
"""

from __future__ import annotations

import contextlib

import pytest

from tests.support.fake_openai import FakeEngine, fake_openai_process
from tests.support.prometheus import PrometheusServer

LIVE_MODEL = "canary-lab-live"
CANDIDATE_MODEL = "canary-lab-candidate"


@pytest.fixture(scope="session")
def fake_engines():
    """{"live": FakeEngine, "candidate": FakeEngine}: each its own process and model name."""
    with contextlib.ExitStack() as stack:
        engines = {}
        for role, model in (("live", LIVE_MODEL), ("candidate", CANDIDATE_MODEL)):
            # The start guard is generous: the machine may be busy with another suite.
            base = stack.enter_context(
                fake_openai_process("--model", model, "--engine-metrics", timeout=120)
            )
            engines[role] = FakeEngine(base, model)
        yield engines


@pytest.fixture(scope="session")
def live_engine(fake_engines) -> FakeEngine:
    return fake_engines["live"]


@pytest.fixture(scope="session")
def candidate_engine(fake_engines) -> FakeEngine:
    return fake_engines["candidate"]


@pytest.fixture(scope="session")
def prometheus(tmp_path_factory, live_engine, candidate_engine):
    """A real Prometheus scraping both engines' /metrics every second (job "engines")."""
    server = PrometheusServer(
        tmp_path_factory.mktemp("prometheus"),
        targets=[live_engine.target, candidate_engine.target],
        scrape_interval="1s",
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def engine_traffic(live_engine, candidate_engine, prometheus):
    """(live, candidate), their synthetic traffic stopped after the test; Prometheus is
    running again too, whatever the test did to it."""
    yield live_engine, candidate_engine
    for engine in (live_engine, candidate_engine):
        engine.traffic(rps=0, error_pct=0)
    prometheus.start()  # a no-op when it runs


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test that used Prometheus shows Prometheus' own log."""
    report = yield
    server = getattr(item, "funcargs", {}).get("prometheus")
    if report.failed and server is not None:
        report.sections.append(("Prometheus log (tail)", server.log_tail()))
    return report
