"""The fake server speaks like the real ones: shapes compared with llama.cpp captures."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from tests.replay.conftest import CAPTURES
from tests.support.fake_openai import FakeOpenAI, ServerConfig


def _events(body: str) -> list[Any]:
    return [
        "[DONE]" if block == "data: [DONE]" else json.loads(block.removeprefix("data: "))
        for block in body.strip().split("\n\n")
    ]


def _post(server: FakeOpenAI, body: dict[str, Any]) -> tuple[int, str]:
    request = urllib.request.Request(
        f"{server.base_url}/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def _shape(chunk: dict[str, Any]) -> tuple:
    choices = chunk["choices"]
    return (
        sorted(chunk),
        [sorted(c) for c in choices],
        [sorted(c["delta"]) for c in choices],
    )


def test_llama_cpp_style_stream_has_the_captured_shapes():
    captured = _events((CAPTURES / "stream_usage.txt").read_text())
    with FakeOpenAI(ServerConfig(model="gemma-3-270m"), style="llama-cpp", tokens=3) as server:
        status, body = _post(
            server,
            {
                "model": "gemma-3-270m",
                "stream": True,
                "stream_options": {"include_usage": True},
                "messages": [{"role": "user", "content": "hi"}],
            },
        )
    ours = _events(body)

    assert status == 200
    assert ours[-1] == captured[-1] == "[DONE]"
    assert _shape(ours[0]) == _shape(captured[0])  # role-only chunk
    assert _shape(ours[1]) == _shape(captured[1])  # content delta
    assert _shape(ours[-2]) == _shape(captured[-2])  # delta {} with finish_reason
    assert ours[-2]["choices"][0]["delta"] == {}
    assert not any("usage" in chunk for chunk in ours[:-1])  # include_usage ignored


def test_llama_cpp_style_tool_deltas_have_the_captured_shape():
    captured = _events((CAPTURES / "stream_tools_named.txt").read_text())
    tool = {"type": "function", "function": {"name": "get_weather", "parameters": {}}}
    with FakeOpenAI(style="llama-cpp") as server:
        _, body = _post(
            server,
            {
                "model": "fake-model",
                "stream": True,
                "tools": [tool],
                "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
                "messages": [{"role": "user", "content": "weather?"}],
            },
        )
    ours = _events(body)

    assert _shape(ours[1]) == _shape(captured[1])
    assert sorted(ours[1]["choices"][0]["delta"]["tool_calls"][0]) == sorted(
        captured[1]["choices"][0]["delta"]["tool_calls"][0]
    )
    assert ours[-2]["choices"][0]["finish_reason"] == captured[-2]["choices"][0]["finish_reason"]


def test_vllm_style_ends_with_a_usage_chunk(fake):
    _, body = _post(
        fake,
        {
            "model": "fake-model",
            "stream": True,
            "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": "hi there"}],
        },
    )
    events = _events(body)

    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert events[-3]["choices"][0]["finish_reason"] == "stop"
    assert events[-2]["choices"] == []
    assert events[-2]["usage"] == {"prompt_tokens": 2, "total_tokens": 10, "completion_tokens": 8}


def test_models_listing_matches_the_llama_cpp_capture():
    captured = json.loads((CAPTURES / "models.json").read_text())
    with FakeOpenAI(ServerConfig(engine="llama_cpp", model="gemma-3-270m")) as server:
        ours = _get(f"{server.base_url}/v1/models")

    assert ours == captured


def test_non_streaming_answer(fake):
    status, body = _post(
        fake, {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}]}
    )
    answer = json.loads(body)

    assert status == 200
    assert answer["object"] == "chat.completion"
    assert answer["choices"][0]["message"]["content"] == "the quick brown fox jumps over the lazy"
    assert answer["usage"]["completion_tokens"] == 8


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"model": "other", "messages": []}, 404, "The model `other` does not exist."),
        (
            {"model": "fake-model", "max_tokens": 5000, "messages": []},
            400,
            "This model's maximum context length is 4096 tokens.",
        ),
        ({"model": "fake-model"}, 400, "messages: field required"),
        (
            {"model": "fake-model", "messages": [{"role": "user", "content": "fake: fault=nope"}]},
            400,
            "fault: 'nope' is not one of",
        ),
    ],
)
def test_refuses_what_vllm_refuses(fake, body, status, message):
    got_status, got = _post(fake, body)

    assert got_status == status
    assert message in json.loads(got)["message"]


def test_max_in_flight_is_recorded(fake):
    fake.configure(ttft_ms=5)
    _post(fake, {"model": "fake-model", "messages": [{"role": "user", "content": "a"}]})

    assert fake.max_in_flight == 1
    assert len(fake.chat_requests) == 1


def test_the_timing_log_has_each_part_of_a_stream_in_order_on_its_timetable(fake):
    fake.configure(ttft_ms=50, itl_ms=10, tokens=3)

    status, _ = _post(
        fake,
        {"model": "fake-model", "stream": True, "messages": [{"role": "user", "content": "a"}]},
    )

    timing = fake.chat_requests[0].timing
    moments = [timing.received, timing.first_byte, *timing.chunks, timing.last_chunk]
    assert status == 200
    assert len(timing.chunks) == 3
    assert moments == sorted(moments)
    assert timing.body_end >= timing.last_chunk
    for sent_ms, due_ms in zip(timing.chunk_ms, (50, 60, 70), strict=True):
        assert sent_ms >= due_ms  # never early


def test_the_timing_log_of_a_plain_answer_is_one_write(fake):
    fake.configure(ttft_ms=20)

    _post(fake, {"model": "fake-model", "messages": [{"role": "user", "content": "a"}]})

    timing = fake.chat_requests[0].timing
    assert timing.chunks == []
    assert timing.first_byte == timing.last_chunk == timing.body_end
    assert timing.ms(timing.first_byte) >= 20
