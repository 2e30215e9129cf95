"""The streaming client against a real HTTP server on loopback (the fake, no mocks)."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import statistics
import time

import httpx
import pytest

from replay.client import (
    _DRAIN_SECONDS,
    BackendConfig,
    ChatRequest,
    ErrorCode,
    Timeouts,
    is_error_code,
    replay_many,
    replay_many_sync,
    replay_one,
)
from tests.replay.conftest import CAPTURES, ask, backend_for
from tests.support.fake_openai import FakeOpenAI, free_port

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}


def test_streamed_answer_is_collected_with_usage_block(fake):
    result = ask(fake, "tokens=5", params={"temperature": 0})

    assert result.ok, result.error_detail
    assert result.output_text == "the quick brown fox jumps"
    assert result.finish_reason == "stop"
    assert result.saw_done
    assert (result.output_tokens, result.output_tokens_source) == (5, "usage")
    assert result.prompt_tokens == 5  # "Tell me something. fake: tokens=5" in words
    assert result.served_model == "fake-model"
    body = fake.chat_requests[0].body
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["temperature"] == 0
    assert body["model"] == "fake-model"


def test_output_tokens_counted_from_chunks_without_usage_block(fake):
    result = ask(fake, "tokens=7 style=llama-cpp")

    assert result.ok, result.error_detail
    assert (result.output_tokens, result.output_tokens_source) == (7, "counted")
    assert result.prompt_tokens is None


def test_usage_block_wins_over_counted_chunks(fake):
    # A server packing three tokens into each chunk (vLLM's stream interval, speculative
    # decoding): 4 chunks, 12 tokens.
    fake.configure(ttft_ms=20, itl_ms=30, tokens=4, tokens_per_chunk=3)

    result = ask(fake)
    server = fake.timing_of(result.request_id)

    assert (result.output_tokens, result.output_tokens_source) == (12, "usage")
    assert len(server.chunks) == 4  # what went over the wire
    assert len(result.itl_ms) == 3  # a gap between each two chunks the client read
    # The time after the first token, spread over the 11 tokens after it, not over 3 gaps.
    assert result.tpot_ms == pytest.approx((result.e2e_ms - result.ttft_ms) / 11)
    assert result.e2e_ms >= server.last_chunk_ms >= 20 + 3 * 30


def test_ttft_excludes_role_chunk_and_tpot_matches_itl(fake):
    fake.configure(ttft_ms=120, itl_ms=15, tokens=11)

    result = ask(fake)
    server = fake.timing_of(result.request_id)

    assert result.ok, result.error_detail
    # The server wrote the role chunk at once and the first content chunk 120 ms after
    # the request arrived; the client's TTFT waits for the content.
    assert server.first_byte < server.chunks[0]
    assert result.ttft_ms >= server.first_chunk_ms >= 120
    # Each token reached the client after the server wrote it, on the fake's timetable.
    arrived_ms = list(itertools.accumulate([result.ttft_ms, *result.itl_ms]))
    assert len(arrived_ms) == len(server.chunks) == 11
    for k, (client_ms, server_ms) in enumerate(zip(arrived_ms, server.chunk_ms, strict=True)):
        assert client_ms >= server_ms >= 120 + 15 * k, k
    # TPOT is the time after the first token over the 10 tokens after it: the mean ITL,
    # plus the wait for [DONE], which the client read after the server sent it.
    assert result.tpot_ms == pytest.approx((result.e2e_ms - result.ttft_ms) / 10)
    assert result.tpot_ms >= statistics.mean(result.itl_ms)
    assert result.e2e_ms >= arrived_ms[-1]
    assert result.e2e_ms >= server.last_chunk_ms >= 120 + 10 * 15


def test_sse_comments_and_multiline_events_parse_like_plain_ones(fake):
    plain = ask(fake, "tokens=6")
    decorated = ask(fake, "tokens=6 ping=true multiline=true")

    assert decorated.ok, decorated.error_detail
    assert decorated.output_text == plain.output_text == "the quick brown fox jumps over"
    assert decorated.output_tokens == 6
    assert decorated.finish_reason == "stop"


@pytest.mark.parametrize("style", ["vllm", "llama-cpp"])
def test_tool_call_assembled_from_deltas(fake, style):
    result = ask(fake, f"style={style}", tools=[WEATHER_TOOL], tool_choice="auto")

    assert result.ok, result.error_detail
    assert result.finish_reason == "tool_calls"
    assert len(result.tool_calls) == 1
    call = result.tool_calls[0]
    assert call.name == "get_weather"  # llama.cpp repeats the name in every delta
    assert json.loads(call.arguments) == {"city": "Paris", "days": 3}
    assert call.id.startswith("call_")
    assert result.ttft_ms is not None
    sent = fake.chat_requests[0].body
    assert sent["tools"] == [WEATHER_TOOL]
    assert sent["tool_choice"] == "auto"


def test_response_format_is_sent_and_answered_with_json(fake):
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    response_format = {"type": "json_schema", "json_schema": {"name": "c", "schema": schema}}

    result = ask(fake, response_format=response_format)

    assert result.ok, result.error_detail
    assert json.loads(result.output_text) == {"city": "Paris"}
    assert fake.chat_requests[0].body["response_format"] == response_format


def test_max_tokens_cut_reports_length(fake):
    result = ask(fake, "tokens=20", params={"max_tokens": 4})

    assert result.ok, result.error_detail
    assert result.finish_reason == "length"
    assert result.output_tokens == 4


def test_base_url_may_end_in_v1(fake):
    backend = BackendConfig(base_url=fake.base_url + "/v1/", model=fake.config.model)

    assert ask(fake, backend=backend).ok
    assert fake.chat_requests[0].path == "/v1/chat/completions"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"base_url": "127.0.0.1:8000", "model": "m"}, "base_url: must start with http"),
        ({"base_url": "http://h", "model": ""}, "model: the served model name is required"),
        ({"base_url": "http://h", "model": "m", "concurrency": 0}, "concurrency: must be at"),
    ],
)
def test_backend_config_names_the_bad_field(fields, message):
    with pytest.raises(ValueError, match=message):
        BackendConfig(**fields)


def test_request_id_is_a_uuid_sent_as_header(fake):
    result = ask(fake)

    assert fake.chat_requests[0].headers["x-request-id"] == result.request_id
    assert len(result.request_id) == 36


# -- each error code from its fault -------------------------------------------------

FAST = Timeouts(connect=2, first_token=0.5, idle=0.4, total=5)


@pytest.mark.parametrize(
    ("directive", "timeouts", "code"),
    [
        ("fault=http_error", FAST, "http_500"),
        ("fault=http_error status=503", FAST, "http_503"),
        ("fault=hang", FAST, ErrorCode.TIMEOUT_FIRST_TOKEN),
        ("fault=hang_headers", FAST, ErrorCode.TIMEOUT_FIRST_TOKEN),
        ("fault=drip drip_after=2 drip_gap_ms=1500", FAST, ErrorCode.TIMEOUT_IDLE),
        (
            "tokens=40 itl_ms=30",
            Timeouts(connect=2, first_token=1, idle=1, total=0.5),
            ErrorCode.TIMEOUT_TOTAL,
        ),
        ("fault=cut cut_after=3", FAST, ErrorCode.STREAM_INTERRUPTED),
        ("fault=cut_clean cut_after=3", FAST, ErrorCode.STREAM_INTERRUPTED),
        ("fault=done_without_finish", FAST, ErrorCode.STREAM_INTERRUPTED),
        ("fault=malformed cut_after=2", FAST, ErrorCode.MALFORMED_CHUNK),
        ("fault=empty", FAST, ErrorCode.EMPTY_OUTPUT),
        ("fault=error_event", FAST, "http_500"),
    ],
)
def test_fault_gets_its_error_code(fake, directive, timeouts, code):
    result = ask(fake, directive, backend=backend_for(fake, timeouts=timeouts))

    assert result.outcome == "error"
    assert result.error_code == code, result.error_detail
    assert result.error_detail
    assert is_error_code(result.error_code)


def test_connect_error_when_nothing_listens():
    backend = BackendConfig(base_url=f"http://127.0.0.1:{free_port()}", model="m")
    chat = ChatRequest(messages=[{"role": "user", "content": "hi"}])

    result = asyncio.run(replay_one(backend, chat))

    assert result.error_code == ErrorCode.CONNECT_ERROR
    assert result.ttft_ms is None


def test_http_error_keeps_a_short_snippet_of_the_body(fake):
    result = ask(fake, "fault=http_error status=502")

    assert result.error_code == "http_502"
    assert result.error_detail == "Internal server error (fake fault 502)"


def test_context_overflow_is_http_400_with_the_server_message(fake):
    fake.configure(max_model_len=10)

    result = ask(fake, params={"max_tokens": 64})

    assert result.error_code == "http_400"
    assert "maximum context length is 10 tokens" in result.error_detail


def test_interrupted_stream_keeps_what_arrived(fake):
    result = ask(fake, "fault=cut cut_after=3")

    assert result.output_text == "the quick brown "
    assert result.output_tokens == 3
    assert "connection lost" in result.error_detail


def test_first_token_timeout_fires_on_time(fake):
    backend = backend_for(fake, timeouts=Timeouts(connect=2, first_token=0.3, idle=5, total=5))
    loop_time = asyncio.run(_timed(backend, "fault=hang"))
    (request,) = fake.chat_requests

    # The server answered at once (headers and the role chunk), then sent no token:
    # the client gave up on the first token (the error code says which deadline fired,
    # not the 5 s idle or total ones), and never before 0.3 s.
    assert request.timing.first_byte is not None
    assert request.timing.chunks == []
    assert loop_time >= 0.3


async def _timed(backend: BackendConfig, directive: str) -> float:
    chat = ChatRequest(messages=[{"role": "user", "content": f"fake: {directive}"}])
    start = asyncio.get_running_loop().time()
    result = await replay_one(backend, chat)
    assert result.error_code == ErrorCode.TIMEOUT_FIRST_TOKEN
    assert result.error_detail == f"no first token within {backend.timeouts.first_token}s"
    return asyncio.get_running_loop().time() - start


def test_slow_first_token_within_budget_is_not_a_timeout(fake):
    backend = backend_for(fake, timeouts=Timeouts(connect=2, first_token=1, idle=0.5, total=5))

    result = ask(fake, "ttft_ms=500 itl_ms=20", backend=backend)

    assert result.ok, result.error_detail
    assert result.ttft_ms >= fake.timing_of(result.request_id).first_chunk_ms >= 500


# -- credentials ----------------------------------------------------------------------

SECRET = "sk-live-0123456789abcdef"


def test_credential_is_sent_as_bearer_token(fake):
    fake.configure(api_key=SECRET)

    result = ask(fake, backend=backend_for(fake, credential=SECRET))

    assert result.ok, result.error_detail
    assert fake.chat_requests[0].headers["authorization"] == f"Bearer {SECRET}"


def test_credential_never_in_error_details_results_or_logs(fake, caplog):
    fake.configure(api_key="the-right-key")  # the 401 body echoes the header it got
    backend = backend_for(fake, credential=SECRET)
    caplog.set_level(logging.DEBUG)

    result = ask(fake, backend=backend)

    assert result.error_code == "http_401"
    assert "[redacted]" in result.error_detail
    assert SECRET not in result.error_detail
    assert SECRET not in json.dumps(result.to_dict(itl="full"))
    assert SECRET not in repr(result)
    assert SECRET not in repr(backend)
    assert SECRET not in caplog.text


def test_a_long_credential_cut_by_the_error_snippet_leaves_no_part_behind(fake):
    # A JWT-sized key echoed in a 401 body runs past the snippet's cut: redacting after
    # cutting would miss the truncated key and keep its first few hundred characters.
    long_secret = "sk-" + "0123456789abcdef" * 25
    fake.configure(api_key="the-right-key")

    result = ask(fake, backend=backend_for(fake, credential=long_secret))

    assert result.error_code == "http_401"
    assert "[redacted]" in result.error_detail
    assert long_secret[:40] not in result.error_detail


def test_credential_echoed_in_an_answer_is_redacted(fake):
    fake.configure(api_key=SECRET)
    backend = backend_for(fake, credential=SECRET)

    result = ask(fake, f'reply="your key is {SECRET} right"', backend=backend)

    assert result.ok, result.error_detail
    assert result.output_text == "your key is [redacted] right"


# -- many requests --------------------------------------------------------------------


def _requests(directives: list[str]) -> list[ChatRequest]:
    return [
        ChatRequest(messages=[{"role": "user", "content": f"fake: {directive}"}])
        for directive in directives
    ]


def test_concurrency_bound_is_respected(fake):
    fake.configure(ttft_ms=60, itl_ms=5, tokens=3)
    backend = backend_for(fake, concurrency=3)

    async def run():
        # A client with a wide pool, so that the bound under test is replay_many's own.
        async with httpx.AsyncClient(limits=httpx.Limits(max_connections=50)) as client:
            return await replay_many(backend, _requests([""] * 12), client=client)

    results = asyncio.run(run())

    assert all(r.ok for r in results)
    assert fake.max_in_flight == 3


def test_connections_are_kept_alive_between_requests(fake):
    results = replay_many_sync(backend_for(fake, concurrency=3), _requests([""] * 9))

    assert all(r.ok for r in results)
    assert len(fake.chat_requests) == 9
    assert fake.connections == 3


def test_body_left_open_after_done_costs_nothing(fake):
    start = time.perf_counter()

    result = ask(fake, "linger_ms=5000 tokens=3")

    wall_ms = (time.perf_counter() - start) * 1000
    server = fake.timing_of(result.request_id)
    body_ended_before_the_client_returned = server.body_end is not None
    assert result.ok, result.error_detail
    # The client came back while the server still held the body open after [DONE].
    assert not body_ended_before_the_client_returned
    # e2e is measured at [DONE], which the client read after the server sent it, not
    # when it stopped reading: it reads on for _DRAIN_SECONDS after [DONE] first.
    assert result.e2e_ms >= server.last_chunk_ms
    assert result.e2e_ms <= wall_ms - _DRAIN_SECONDS * 1000


def test_one_limiter_bounds_several_runs_on_a_backend(fake):
    fake.configure(ttft_ms=60, itl_ms=5, tokens=3)
    backend = backend_for(fake, concurrency=8)

    async def run():
        limiter = asyncio.Semaphore(2)
        return await asyncio.gather(
            replay_many(backend, _requests([""] * 5), limiter=limiter),
            replay_many(backend, _requests([""] * 5), limiter=limiter),
        )

    first, second = asyncio.run(run())

    assert all(r.ok for r in first + second)
    assert fake.max_in_flight == 2


def test_results_come_back_in_input_order(fake):
    # The first request is the slowest, so completion order is the reverse.
    directives = [f'ttft_ms={300 - 60 * i} reply="answer {i}"' for i in range(5)]
    finished: list[int] = []

    results = replay_many_sync(
        backend_for(fake, concurrency=5),
        _requests(directives),
        on_result=lambda index, _result: finished.append(index),
    )

    assert [r.output_text for r in results] == [f"answer {i}" for i in range(5)]
    # on_result ran in the order the server finished the answers (its own log; on
    # its timetable the reverse of the input), while the list keeps the input order.
    ended = {r.headers["x-request-id"]: r.timing.last_chunk for r in fake.chat_requests}
    assert finished == sorted(range(5), key=lambda i: ended[results[i].request_id])


def test_async_on_result_is_awaited(fake):
    seen: list[tuple[int, str | None]] = []

    async def store(index, result):
        await asyncio.sleep(0)
        seen.append((index, result.error_code))

    async def run():
        return await replay_many(
            backend_for(fake), _requests(["", "fault=http_error"]), on_result=store
        )

    asyncio.run(run())

    assert sorted(seen) == [(0, None), (1, "http_500")]


def test_a_failing_on_result_stops_the_run_with_its_own_error(fake):
    def store(index, result):
        raise RuntimeError(f"database is gone (result {index})")

    with pytest.raises(RuntimeError, match="database is gone"):
        replay_many_sync(backend_for(fake, concurrency=1), _requests([""] * 3), on_result=store)

    assert len(fake.chat_requests) == 1


def test_a_sample_may_not_set_stream_or_model(fake):
    with pytest.raises(ValueError, match=r"requests\[1\]\.params\.stream"):
        replay_many_sync(
            backend_for(fake),
            [
                ChatRequest(messages=[{"role": "user", "content": "a"}]),
                ChatRequest(messages=[{"role": "user", "content": "b"}], params={"stream": False}),
            ],
        )
    assert fake.chat_requests == []


# -- real captures --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("capture", "text", "tokens", "finish"),
    [
        ("stream_usage.txt", "What is the capital of France?", 16, "length"),
        ("long_stream.txt", None, 200, "length"),
        ("stream_json_object_schema.txt", '{ "name": "cat", "age": 1000000000000000} ', 30, "stop"),
    ],
)
def test_llama_cpp_captures_parse(fake, capture, text, tokens, finish):
    fake.configure(raw_stream=(CAPTURES / capture).read_bytes(), ttft_ms=30)

    result = ask(fake)

    assert result.ok, result.error_detail
    assert (result.output_tokens, result.output_tokens_source) == (tokens, "counted")
    assert result.finish_reason == finish
    assert result.served_model == "gemma-3-270m"
    assert result.ttft_ms >= 30
    assert result.e2e_ms >= fake.timing_of(result.request_id).last_chunk_ms
    if text is not None:
        assert result.output_text.startswith(text)


def test_llama_cpp_tool_capture_assembles_one_call(fake):
    fake.configure(raw_stream=(CAPTURES / "stream_tools_named.txt").read_bytes())

    result = ask(fake)

    assert result.ok, result.error_detail
    assert [(c.name, c.arguments) for c in result.tool_calls] == [
        ("get_weather", '{ "city": "Paris, France" } ')
    ]
    assert result.output_tokens == 14
    assert result.output_text == ""


def test_keepalive_comments_alone_do_not_count_as_tokens():
    with FakeOpenAI(raw_stream=b": ping\n\n" * 3 + b"data: [DONE]\n\n") as server:
        result = ask(server)

    assert result.error_code == ErrorCode.STREAM_INTERRUPTED
    assert result.ttft_ms is None
    assert result.output_tokens is None


# -- the server's own timing ------------------------------------------------------------


@pytest.mark.parametrize(("style", "field"), [("vllm", "metrics"), ("llama-cpp", "timings")])
def test_server_reported_ttft_is_kept_beside_the_clients(fake, style, field):
    fake.configure(ttft_ms=40, itl_ms=5, tokens=4, style=style, server_timing=True)

    result = ask(fake)
    server = fake.timing_of(result.request_id)

    assert result.ok, result.error_detail
    # The fake reports its own log's TTFT; the client keeps that figure and its own.
    assert result.server_ttft_ms == pytest.approx(server.first_chunk_ms)
    assert list(result.server_timing) == [field]
    assert result.ttft_ms >= result.server_ttft_ms >= 40


def test_no_server_timing_when_the_server_reports_none(fake):
    result = ask(fake, "tokens=3")

    assert result.ok, result.error_detail
    assert (result.server_ttft_ms, result.server_timing) == (None, {})


def test_server_timing_that_is_not_a_number_is_ignored(fake):
    body = (
        'data: {"choices": [{"index": 0, "delta": {"content": "hi"}}]}\n\n'
        'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], '
        '"timings": {"prompt_ms": "fast"}, "metrics": [1]}\n\n'
        "data: [DONE]\n\n"
    )
    fake.configure(raw_stream=body.encode())

    result = ask(fake)

    assert result.ok, result.error_detail
    assert (result.server_ttft_ms, result.server_timing) == (None, {})
