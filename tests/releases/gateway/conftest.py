"""A real LiteLLM proxy in front of two fake OpenAI-compatible backends, once per session."""

from __future__ import annotations

import contextlib

import pytest

from tests.support.fake_openai import FakeOpenAI, ServerConfig, fake_openai_process
from tests.support.litellm_proxy import FakeBackend, LiteLLMProxy

# A backend that wants a key: the proxy gets it from its environment, the config only
# names the variable.
KEYED_ENV = "KB_KEYED_BACKEND_KEY"
KEYED_SECRET = "sk-backend-secret-for-tests"


@pytest.fixture(scope="session")
def fake_backends():
    """Two fake servers, each its own process serving its own model name."""
    with contextlib.ExitStack() as stack:
        backends = []
        for served in ("served-a", "served-b"):
            # The start guard is generous: the machine may be busy with another suite.
            base = stack.enter_context(fake_openai_process("--model", served, timeout=120))
            backends.append(FakeBackend(base, served))
        yield backends


@pytest.fixture(scope="session")
def keyed_backend():
    """A fake server (in a thread: it takes few requests) that answers 401 without its key."""
    with FakeOpenAI(ServerConfig(model="served-keyed", api_key=KEYED_SECRET)) as server:
        yield server


@pytest.fixture(scope="session")
def litellm_gateway(tmp_path_factory):
    """The proxy; a test gives it its config with ``use`` (a restart only when it changed)."""
    proxy = LiteLLMProxy(tmp_path_factory.mktemp("litellm"), env={KEYED_ENV: KEYED_SECRET})
    yield proxy
    proxy.stop()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test that used the proxy shows the proxy's own log."""
    report = yield
    proxy = getattr(item, "funcargs", {}).get("litellm_gateway")
    if report.failed and proxy is not None:
        report.sections.append(("LiteLLM proxy log (tail)", proxy.log_tail()))
    return report
