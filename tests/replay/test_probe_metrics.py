"""The `metrics` capability verified against the engine's own /metrics (issue 34, §6.5):
every declared series must be there, and the probe records which of the seven metrics a
release declares the scrape backs."""

from __future__ import annotations

import pytest

from ledger import services as ledger_services
from ledger.models import Event
from replay import services
from tests.replay.helpers import backend_on
from tests.support.fake_openai import FakeOpenAI, ServerConfig

pytestmark = pytest.mark.django_db

# A vLLM /metrics as its PrometheusStatLogger writes it (names, types, a label each).
VLLM_METRICS = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="qwen2.5-7b-instruct"} 3.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="qwen2.5-7b-instruct"} 0.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="qwen2.5-7b-instruct"} 0.41
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="qwen2.5-7b-instruct"} 9120.0
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="qwen2.5-7b-instruct"} 40.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="qwen2.5-7b-instruct"} 52.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="qwen2.5-7b-instruct"} 52.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="qwen2.5-7b-instruct"} 4.1
"""


@pytest.fixture
def server():
    config = ServerConfig(
        model="qwen2.5-7b-instruct", max_model_len=32768, version="0.6.3", metrics=VLLM_METRICS
    )
    with FakeOpenAI(config) as fake:
        yield fake


def _declare_metrics(revision, names):
    return ledger_services.declare_capability(revision, actor=None, kind="metrics", value=names)


def test_declared_series_found_on_the_engine_verify_the_capability(server):
    backend = backend_on(server)
    names = [
        "vllm:num_requests_running",
        "vllm:generation_tokens_total",
        "vllm:time_to_first_token_seconds",
    ]
    _declare_metrics(backend.revision, names)

    probe = services.probe_backend(backend, actor=None)

    metrics = backend.revision.capabilities.get(kind="metrics")
    assert metrics.status == "verified"
    assert metrics.verified_fingerprint == backend.revision.fingerprint
    assert metrics.evidence["found"] == names and metrics.evidence["missing"] == []
    # What the scrape backs of the seven: no TPOT histogram, no error counter, no DCGM.
    assert metrics.evidence["covers"] == ["ttft", "tokens_per_s", "queue_length", "kv_cache_usage"]
    assert probe.capability_results["metrics"]["status"] == "verified"
    assert Event.objects.filter(action="capability.verified").count() == 1


def test_a_declared_series_the_engine_does_not_show_fails_naming_it(server):
    backend = backend_on(server)
    _declare_metrics(backend.revision, ["vllm:num_requests_running", "vllm:num_preemptions_total"])

    services.probe_backend(backend, actor=None)

    metrics = backend.revision.capabilities.get(kind="metrics")
    assert metrics.status == "failed" and metrics.verified_fingerprint == ""
    assert metrics.evidence["missing"] == ["vllm:num_preemptions_total"]


def test_an_engine_without_metrics_fails_the_capability_with_the_answer_it_gave(server):
    server.configure(metrics=None)
    backend = backend_on(server)
    _declare_metrics(backend.revision, ["vllm:num_requests_running"])

    services.probe_backend(backend, actor=None)

    metrics = backend.revision.capabilities.get(kind="metrics")
    assert metrics.status == "failed"
    assert metrics.evidence["outcome"] == "unreachable"
    assert "answered HTTP 404" in metrics.evidence["error_detail"]
