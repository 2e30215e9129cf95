"""Probing a backend: served models, context length, engine version."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest

from replay.probes import ProbeError, get_models, get_version
from tests.support.fake_openai import FakeOpenAI, ServerConfig

SECRET = "sk-probe-secret-value"


def run(coroutine):
    """asyncio.run on a thread of its own: a browser test may leave a loop running on this one."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def test_models_report_served_name_and_max_context(fake):
    fake.configure(model="qwen2.5-7b-instruct-awq", max_model_len=32768)

    models = run(get_models(fake.base_url))

    assert [(m.id, m.max_context) for m in models] == [("qwen2.5-7b-instruct-awq", 32768)]


def test_models_without_context_length_report_none():
    # llama.cpp's /v1/models (tests/fixtures/backends/llama-cpp/models.json) has no length.
    with FakeOpenAI(ServerConfig(engine="llama_cpp", model="gemma-3-270m")) as server:
        models = run(get_models(server.base_url + "/v1"))

    assert [(m.id, m.max_context) for m in models] == [("gemma-3-270m", None)]


def test_models_probe_error_names_the_status_not_the_credential(fake):
    fake.configure(api_key="another-key")

    with pytest.raises(ProbeError) as raised:
        run(get_models(fake.base_url, credential=SECRET))

    assert "HTTP 401" in str(raised.value)
    assert SECRET not in str(raised.value)


def test_models_probe_sends_the_credential(fake):
    fake.configure(api_key=SECRET)

    models = run(get_models(fake.base_url, credential=SECRET))

    assert models[0].id == "fake-model"


@pytest.mark.parametrize(
    ("engine", "endpoint"),
    [
        ("vllm", "/version"),
        ("tgi", "/info"),
        ("ollama", "/api/version"),
        ("sglang", "/get_server_info"),
    ],
)
def test_version_read_from_the_engine_endpoint(engine, endpoint):
    with FakeOpenAI(ServerConfig(engine=engine, version="9.8.7")) as server:
        info = run(get_version(server.base_url, engine))
        asked = [r.path for r in server.requests]

    assert (info.engine, info.version, info.endpoint) == (engine, "9.8.7", endpoint)
    assert asked == [endpoint]  # the declared engine's endpoint is tried first


def test_version_found_when_the_declared_engine_is_wrong():
    with FakeOpenAI(ServerConfig(engine="sglang", version="0.4.1")) as server:
        info = run(get_version(server.base_url, "vllm"))

    assert (info.engine, info.version) == ("sglang", "0.4.1")


def test_version_unknown_when_no_endpoint_answers():
    with FakeOpenAI(ServerConfig(engine="llama_cpp")) as server:
        info = run(get_version(server.base_url, "llama_cpp"))

    assert (info.engine, info.version, info.endpoint) == (None, None, None)
