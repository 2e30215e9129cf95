"""The fake engine's own /metrics: vLLM's names, labels and buckets, fed by synthetic
traffic a test steers (POST /_fake/traffic) and by the chats it answers."""

from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.request
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.engine_metrics import TTFT_BUCKETS, jitter
from tests.support.fake_openai import FakeOpenAI, ServerConfig, set_traffic
from tests.support.metrics import sample_value

SERIES = {
    "vllm:time_to_first_token_seconds": "histogram",
    "vllm:inter_token_latency_seconds": "histogram",
    "vllm:e2e_request_latency_seconds": "histogram",
    "vllm:request_success": "counter",
}


def _scrape(server: FakeOpenAI) -> str:
    with urllib.request.urlopen(f"{server.base_url}/metrics", timeout=10) as response:
        assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
        return response.read().decode()


def _traffic_state(server: FakeOpenAI) -> dict[str, Any]:
    with urllib.request.urlopen(f"{server.base_url}/_fake/traffic", timeout=10) as response:
        return json.load(response)


def _wait_recorded(server: FakeOpenAI, count: int, timeout: float = 60) -> None:
    """Until the server reports it has recorded `count` synthetic requests."""
    deadline = time.monotonic() + timeout
    while _traffic_state(server)["recorded"] < count:
        assert time.monotonic() < deadline, (
            f"{count} synthetic requests not recorded in {timeout} s"
        )
        time.sleep(0.05)


def _chat(server: FakeOpenAI, content: str, *, stream: bool = True) -> None:
    body = {"model": server.config.model, "stream": stream, "messages": [
        {"role": "user", "content": content}
    ]}  # fmt: skip
    request = urllib.request.Request(
        f"{server.base_url}/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()
    except urllib.error.HTTPError as error:
        error.read()
    except (http.client.IncompleteRead, ConnectionError):
        pass  # a fault that drops the stream


def _buckets(text: str, name: str) -> dict[float, float]:
    return {
        float(sample.labels["le"]): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == f"{name}_bucket"
    }


def test_metrics_answer_404_until_the_engine_metrics_are_on():
    with FakeOpenAI() as server:
        with pytest.raises(urllib.error.HTTPError) as refused:
            _scrape(server)
        assert refused.value.code == 404

        server.configure(engine_metrics=True)
        text = _scrape(server)

    families = {f.name: f.type for f in text_string_to_metric_families(text)}
    assert {name: families.get(name) for name in SERIES} == SERIES
    assert sample_value(text, "vllm:request_success_total", finished_reason="abort") == 0
    # vLLM's own TTFT buckets, so a quantile has the resolution it has against vLLM.
    assert sorted(_buckets(text, "vllm:time_to_first_token_seconds")) == [
        *TTFT_BUCKETS,
        float("inf"),
    ]


def test_synthetic_traffic_is_recorded_at_its_latency_under_the_servers_model_name():
    with FakeOpenAI(ServerConfig(model="canary-x")) as server:
        state = set_traffic(server.base_url, rps=50, ttft_ms=200, itl_ms=20, error_pct=0)
        assert state["rps"] == 50 and state["ttft_ms"] == 200
        _wait_recorded(server, 30)
        text = _scrape(server)

    ttft = _buckets(text, "vllm:time_to_first_token_seconds")
    count = sample_value(text, "vllm:time_to_first_token_seconds_count", model_name="canary-x")
    assert count >= 30
    assert ttft[0.1] == 0 and ttft[0.25] == count  # 200 ms ± 10 %: all in (0.1, 0.25]
    itl = _buckets(text, "vllm:inter_token_latency_seconds")
    assert itl[0.01] == 0 and itl[0.025] == 7 * count  # 8 tokens: 7 gaps of 20 ms ± 10 %
    assert sample_value(text, "vllm:request_success_total", finished_reason="stop") == count
    mean = sample_value(text, "vllm:time_to_first_token_seconds_sum") / count
    assert 0.18 <= mean <= 0.22


def test_error_pct_of_the_synthetic_requests_finish_as_abort():
    with FakeOpenAI(ServerConfig(engine_metrics=True)) as server:
        set_traffic(server.base_url, rps=100, ttft_ms=50, error_pct=20)
        _wait_recorded(server, 50)
        text = _scrape(server)

    aborted = sample_value(text, "vllm:request_success_total", finished_reason="abort")
    stopped = sample_value(text, "vllm:request_success_total", finished_reason="stop")
    # Spread evenly: after n requests exactly floor(n / 5) of them aborted.
    assert aborted == (aborted + stopped) // 5
    assert aborted >= 10
    # An aborted request produced no token: only the others have a TTFT.
    assert sample_value(text, "vllm:time_to_first_token_seconds_count") == stopped


def test_rps_zero_stops_the_traffic_and_real_chats_are_observed_with_their_own_timing():
    with FakeOpenAI(ServerConfig(engine_metrics=True)) as server:
        set_traffic(server.base_url, rps=100, ttft_ms=50)
        _wait_recorded(server, 10)
        stopped = set_traffic(server.base_url, rps=0)["recorded"]

        _chat(server, "hi\nfake: ttft_ms=300 itl_ms=40 tokens=3")  # takes >= 380 ms
        after = _traffic_state(server)["recorded"]
        text = _scrape(server)

    assert after == stopped  # nothing recorded while the chat ran
    ttft = _buckets(text, "vllm:time_to_first_token_seconds")
    assert ttft[0.25] == stopped  # the synthetic ones, at 50 ms
    assert ttft[float("inf")] == stopped + 1  # and the chat's own, 300 ms or a little more
    itl = _buckets(text, "vllm:inter_token_latency_seconds")
    assert ttft[0.01] == 0 and itl[0.025] == 7 * stopped  # synthetic gaps: itl_ms is 0
    assert itl[float("inf")] - itl[0.025] == 2  # the chat's two gaps of 40 ms
    assert sample_value(text, "vllm:e2e_request_latency_seconds_count") == stopped + 1


def test_a_chat_a_fault_breaks_finishes_as_abort_and_an_invalid_one_counts_nowhere():
    with FakeOpenAI(ServerConfig(engine_metrics=True)) as server:
        _chat(server, "fake: fault=cut cut_after=1")
        _chat(server, "fake: fault=http_error status=503", stream=False)
        _chat(server, "fake: tokens=2", stream=False)  # a whole body, finished
        server.configure(model="renamed")
        _chat(server, "fake: tokens=1")  # the label follows the server's model name
        request = urllib.request.Request(
            f"{server.base_url}/v1/chat/completions", data=b'{"model": "renamed"}'
        )
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(request, timeout=10)  # no messages: refused, 400
        text = _scrape(server)

    def finished(reason: str, model: str) -> float:
        return sample_value(
            text, "vllm:request_success_total", finished_reason=reason, model_name=model
        )

    assert finished("abort", "fake-model") == 2
    assert finished("stop", "fake-model") == 1
    assert finished("stop", "renamed") == 1
    assert sample_value(text, "vllm:e2e_request_latency_seconds_count") == 4


@pytest.mark.parametrize(
    "body",
    [{"rps": -1}, {"error_pct": 101}, {"tokens": 0}, {"rps": "fast"}, {"latency": 3}, [1]],
)
def test_a_traffic_request_the_server_cannot_follow_is_refused_and_changes_nothing(body):
    with FakeOpenAI() as server:
        request = urllib.request.Request(
            f"{server.base_url}/_fake/traffic", data=json.dumps(body).encode(), method="POST"
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 400
        assert "traffic:" in json.loads(refused.value.read())["message"]
        assert _traffic_state(server)["rps"] == 0
        assert not server.config.engine_metrics


def test_the_jitter_spreads_each_window_of_21_requests_evenly():
    window = sorted(round(jitter(index, 10), 6) for index in range(5, 26))

    assert window == [round(1 + step / 100, 6) for step in range(-10, 11)]
    assert jitter(3, 0) == 1


def test_chats_answered_while_the_engine_metrics_are_off_count_nowhere():
    with FakeOpenAI() as server:
        _chat(server, "hi")
        server.configure(engine_metrics=True)
        _chat(server, "hi")
        text = _scrape(server)

    assert sample_value(text, "vllm:request_success_total") == 1
