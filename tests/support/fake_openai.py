"""An OpenAI-compatible model server on loopback with controllable latency and faults.

Tests start it in a background thread (``FakeOpenAI``) or, when the client under test
needs the CPU to itself (the benchmark), in a subprocess (``fake_openai_process``).
It speaks plain HTTP/1.1 on ``asyncio.start_server``: token timing is scheduled
against absolute deadlines, so the configured TTFT and ITL hold to about a
millisecond at any concurrency. Each request's ``timing`` is the server's own log of
when it sent what, on the clock the replay client measures with (see ``Timing``).

Behaviour is a ``Scenario``: a server-wide default (``FakeOpenAI(scenario=...)``,
``server.configure(...)`` or ``POST /_fake/config``), overridden per request by a
directive line in the last user message, e.g.::

    fake: ttft_ms=200 fault=cut cut_after=3
    fake: output=refusal
    fake: reply="Paris is the capital." usage=false

Output shapes follow real servers: ``style="vllm"`` (role chunk with empty
content, finish_reason on the last content chunk, usage chunk with empty
``choices``) or ``style="llama-cpp"`` (as in tests/fixtures/backends/llama-cpp/:
role-only chunk, separate ``delta: {}`` finish chunk, no usage chunk ever,
tool-call deltas repeating id and name with the legacy ``function_call``).

With ``engine_metrics`` on, ``GET /metrics`` answers the engine's own series as vLLM
names them (tests/support/engine_metrics.py): every chat it answers is observed with its
real timing, and ``POST /_fake/traffic`` (``set_traffic``) makes it record synthetic
requests at a latency the test chooses, e.g. ``{"rps": 20, "ttft_ms": 200, "itl_ms":
20, "error_pct": 0}`` until changed; ``{"rps": 0}`` stops it. ``GET /_fake/traffic``
answers the current traffic and how many requests it has recorded.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import itertools
import json
import re
import shlex
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tests.support.engine_metrics import CONTENT_TYPE, EngineMetrics, Traffic, TrafficGenerator
from tests.support.processes import ROOT, child_env, free_port

FAULTS = (
    "http_error",  # answer `status` with an error body, before any stream
    "hang",  # 200, headers and the role chunk, then nothing
    "hang_headers",  # accept the request and never answer
    "cut",  # drop the connection after `cut_after` content chunks
    "cut_clean",  # end the HTTP body after `cut_after` chunks: no finish, no [DONE]
    "done_without_finish",  # [DONE] but no finish_reason (llama.cpp's interrupted stream)
    "malformed",  # a data line of invalid JSON after `cut_after` chunks
    "drip",  # after `drip_after` chunks, `drip_gap_ms` between chunks
    "empty",  # a finish chunk and no content at all
    "error_event",  # vLLM's in-stream error object after `cut_after` chunks, then [DONE]
)
OUTPUTS = ("text", "refusal", "json", "invalid_json", "fenced_json", "tool_call")
STYLES = ("vllm", "llama-cpp")

REFUSAL_TEXT = "I'm sorry, but I can't help with that request."
_WORDS = ("the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog")
_JSON_PIECES = re.compile(r'\s+|[{}\[\]:,]|"(?:[^"\\]|\\.)*"|[^\s{}\[\]:,"]+')
_TEXT_PIECES = re.compile(r"\s*\S+\s*|\s+")


@dataclass
class Scenario:
    ttft_ms: float = 0.0
    itl_ms: float = 0.0
    tokens: int = 8  # content chunks of generated text (when `reply` is not given)
    reply: str | None = None  # exact text to stream, one word per chunk
    output: str | None = None  # one of OUTPUTS; None picks from the request
    fault: str | None = None  # one of FAULTS
    status: int = 500
    cut_after: int = 2
    drip_after: int = 2
    drip_gap_ms: float = 1000.0
    hang_s: float = 3600.0
    linger_ms: float = 0.0  # keep the body open this long after [DONE]
    usage: bool = True  # honour stream_options.include_usage
    tokens_per_chunk: int = 1  # what the usage block counts per content chunk
    style: str = "vllm"  # or "llama-cpp": chunk shapes, see the module docstring
    ping: bool = False  # ": ping" comment before and between events
    multiline: bool = False  # each JSON event spread over several data: lines
    raw_stream: bytes | None = None  # a recorded SSE body, served event by event
    # Report the server's own timing on the last chunks, as llama.cpp server does
    # (`timings`, style llama-cpp) or vLLM with --enable-per-request-metrics (`metrics`).
    server_timing: bool = False

    def __post_init__(self) -> None:
        if self.fault is not None and self.fault not in FAULTS:
            raise ValueError(f"fault: {self.fault!r} is not one of {FAULTS}")
        if self.output is not None and self.output not in OUTPUTS:
            raise ValueError(f"output: {self.output!r} is not one of {OUTPUTS}")
        if self.style not in STYLES:
            raise ValueError(f"style: {self.style!r} is not one of {STYLES}")


@dataclass
class ServerConfig:
    model: str = "fake-model"
    max_model_len: int | None = 4096
    # Whose version endpoint answers (vllm, tgi, ollama, sglang; any other: none) and
    # whether /v1/models reports max_model_len (vllm and sglang do).
    engine: str = "vllm"
    version: str = "0.11.0"
    api_key: str | None = None
    check_model: bool = True
    scenario: Scenario = field(default_factory=Scenario)
    # Prometheus exposition text served at GET /metrics, as given (it wins over the next).
    metrics: str | None = None
    # Serve the engine's own vLLM-named series at GET /metrics (tests/support/engine_metrics.py):
    # every chat answered while it is on, and the synthetic traffic of POST /_fake/traffic,
    # which turns it on. Off, and without `metrics`, /metrics answers 404 as a server
    # without metrics does.
    engine_metrics: bool = False
    # At most this many chat requests served at once; the others wait, in arrival order,
    # as an engine's queue does (their arrival is logged when they are read, before the
    # wait). None: no cap. The service time is the scenario's (ttft_ms, itl_ms, tokens).
    max_concurrent: int | None = None


@dataclass
class Timing:
    """When the server did what for one request: its own log, on ``time.perf_counter()``.

    The replay client measures on that clock too, so a test that runs the fake in
    its own process can hold the client's numbers against the server's. The client
    starts its clock before the server receives the request and reads each chunk
    after the server wrote it: its TTFT, each token's arrival and its e2e are never
    below the server's (``*_ms``, from receipt), however loaded the machine is. Each
    moment is read just before the write it stands for.
    """

    received: float  # the request's head and body were read
    first_byte: float | None = None  # the status line (streaming: with the role chunk)
    chunks: list[float] = field(default_factory=list)  # each token-carrying chunk
    last_chunk: float | None = None  # the last event ([DONE]), or the whole body
    body_end: float | None = None  # the body ended, or the connection was dropped

    def ms(self, moment: float | None) -> float | None:
        """Milliseconds from the request's arrival to ``moment``."""
        return None if moment is None else (moment - self.received) * 1000

    @property
    def first_chunk_ms(self) -> float | None:
        """The server's own TTFT: receipt to the first token-carrying chunk."""
        return self.ms(self.chunks[0]) if self.chunks else None

    @property
    def chunk_ms(self) -> list[float]:
        return [(moment - self.received) * 1000 for moment in self.chunks]

    @property
    def last_chunk_ms(self) -> float | None:
        return self.ms(self.last_chunk)

    def sent(self, *, last: bool = False, end: bool = False) -> None:
        """Note a write about to happen: the first one is the first byte."""
        now = time.perf_counter()
        if self.first_byte is None:
            self.first_byte = now
        if last:
            self.last_chunk = now
        if end:
            self.body_end = now


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    received_at: float
    timing: Timing
    first_token_at: float | None = None  # loop time the first content chunk was written
    lateness_ms: list[float] = field(default_factory=list)  # each chunk's write past its due
    response_id: str = ""  # the chatcmpl- id answered (streams), to pair with a client's log


def _scenario_overrides(text: str) -> dict[str, Any]:
    for line in text.splitlines():
        if line.strip().startswith("fake:"):
            pairs = shlex.split(line.strip()[len("fake:") :])
            return dict(pair.split("=", 1) for pair in pairs)
    return {}


def _coerce(scenario: Scenario, values: dict[str, Any]) -> Scenario:
    converted: dict[str, Any] = {}
    for name, value in values.items():
        current = getattr(scenario, name)  # AttributeError names a bad key
        if isinstance(value, str) and not isinstance(current, str):
            if isinstance(current, bool):
                value = value.lower() in ("1", "true", "yes")
            elif isinstance(current, int):
                value = int(value)
            elif isinstance(current, float):
                value = float(value)
            elif value.lower() == "none":
                value = None
        converted[name] = value
    return dataclasses.replace(scenario, **converted)


def example_for(schema: dict[str, Any]) -> Any:
    """A small instance of a JSON Schema (the subset structured-output requests use)."""
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return example_for(schema[key][0])
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        props = schema.get("properties", {})
        return {name: example_for(sub) for name, sub in props.items()}
    if kind == "array":
        return [example_for(schema.get("items", {})) for _ in range(schema.get("minItems", 1))]
    if kind == "string":
        return "x" * max(schema.get("minLength", 0), 1) if "minLength" in schema else "Paris"
    if kind == "integer":
        return schema.get("minimum", 3)
    if kind == "number":
        return schema.get("minimum", 1.5)
    if kind == "boolean":
        return True
    return None


def _pieces(text: str, pattern: re.Pattern[str]) -> list[str]:
    return [piece for piece in pattern.findall(text) if piece]


class _Handler:
    """One server's state and its request handling, run inside one event loop."""

    def __init__(self, config: ServerConfig) -> None:
        self.engine = EngineMetrics(config.model)
        self.traffic = TrafficGenerator(self.engine)
        self.config = config
        self.requests: list[RecordedRequest] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.connections = 0
        # Notified at each chat request's arrival (FakeOpenAI.wait_for_chat_requests).
        self.arrivals = threading.Condition()
        self._tasks: set[asyncio.Task] = set()
        self._cap: tuple[int, asyncio.Semaphore] | None = None

    def _slot(self) -> contextlib.AbstractAsyncContextManager[Any]:
        """A serving slot under ``config.max_concurrent`` (made on the serving loop)."""
        cap = self.config.max_concurrent
        if cap is None:
            return contextlib.nullcontext()
        if self._cap is None or self._cap[0] != cap:
            self._cap = (cap, asyncio.Semaphore(cap))
        return self._cap[1]

    @property
    def config(self) -> ServerConfig:
        return self._config

    @config.setter
    def config(self, config: ServerConfig) -> None:
        # The series are labelled with the name the server answers to, as vLLM's are.
        self._config = config
        self.engine.model = config.model

    # -- HTTP plumbing ---------------------------------------------------------------
    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.connections += 1
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, target, _ = lines[0].split(" ", 2)
                headers = {}
                for line in lines[1:]:
                    if line:
                        name, _, value = line.partition(":")
                        headers[name.strip().lower()] = value.strip()
                length = int(headers.get("content-length", "0"))
                raw = await reader.readexactly(length) if length else b""
                keep_open = await self._dispatch(method, target, headers, raw, writer)
                if not keep_open or headers.get("connection", "").lower() == "close":
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        except asyncio.CancelledError:
            return  # the server is stopping; asyncio.streams would log a cancelled handler
        finally:
            self._tasks.discard(task)
            writer.close()

    @staticmethod
    async def _respond(
        writer: asyncio.StreamWriter,
        status: int,
        body: Any,
        content_type: str = "application/json",
        *,
        timing: Timing | None = None,
    ) -> bool:
        payload = body if isinstance(body, bytes) else json.dumps(body).encode()
        head = (
            f"HTTP/1.1 {status} {'OK' if status == 200 else 'Error'}\r\n"
            f"content-type: {content_type}\r\ncontent-length: {len(payload)}\r\n\r\n"
        )
        if timing is not None:
            timing.sent(last=True, end=True)
        writer.write(head.encode() + payload)
        await writer.drain()
        return True

    async def _dispatch(
        self,
        method: str,
        target: str,
        headers: dict[str, str],
        raw: bytes,
        writer: asyncio.StreamWriter,
    ) -> bool:
        loop = asyncio.get_running_loop()
        path = target.split("?", 1)[0]
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            return await self._respond(writer, 400, _error("body is not JSON", 400))
        if path.startswith("/_fake/"):
            return await self._control(method, path, body, writer)
        # The log's receipt is read first: the timetable, from loop time, starts after it.
        timing = Timing(time.perf_counter())
        record = RecordedRequest(method, path, headers, body, loop.time(), timing)
        self.requests.append(record)
        if path == "/v1/chat/completions":
            with self.arrivals:
                self.arrivals.notify_all()
        auth = self.config.api_key
        if auth is not None and headers.get("authorization") != f"Bearer {auth}":
            # Echoes what it got, as careless servers do: the client must not pass it on.
            seen = headers.get("authorization", "")
            return await self._respond(
                writer,
                401,
                {"error": "Unauthorized", "received_authorization": seen},
                timing=timing,
            )
        if method == "GET" and path == "/metrics" and self.config.metrics is not None:
            return await self._respond(
                writer, 200, self.config.metrics.encode(), CONTENT_TYPE, timing=timing
            )
        if method == "GET" and path == "/metrics" and self.config.engine_metrics:
            return await self._respond(
                writer, 200, self.engine.exposition(), CONTENT_TYPE, timing=timing
            )
        if method == "GET":
            return await self._respond(writer, *self._get(path))
        if method == "POST" and path == "/v1/chat/completions":
            async with self._slot():
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
                try:
                    return await self._chat(record, body, writer)
                finally:
                    self.in_flight -= 1
        return await self._respond(writer, 404, {"detail": "Not Found"})

    async def _control(self, method: str, path: str, body: Any, writer) -> bool:
        if path == "/_fake/stats":
            stats = {
                "requests": len(self.requests),
                "in_flight": self.in_flight,
                "connections": self.connections,
                "max_in_flight": self.max_in_flight,
                "first_token_ms": [
                    (r.first_token_at - r.received_at) * 1000
                    for r in self.requests
                    if r.first_token_at is not None
                ],
                "lateness_ms": [late for r in self.requests for late in r.lateness_ms],
                # Monotonic clock readings, comparable with a client's time.perf_counter()
                # on the same Linux machine: where a request's time went.
                "timeline": {
                    r.headers.get("x-request-id", ""): [r.received_at, r.first_token_at]
                    for r in self.requests
                    if r.path == "/v1/chat/completions"
                },
                # The same in arrival order, for clients that send no X-Request-Id.
                "arrivals": [
                    [
                        r.received_at,
                        r.first_token_at,
                        r.headers.get("x-request-id", ""),
                        r.response_id,
                    ]
                    for r in self.requests
                    if r.path == "/v1/chat/completions"
                ],
            }
            return await self._respond(writer, 200, stats)
        if path == "/_fake/config" and method == "POST":
            scenario = body.pop("scenario", {})
            self.config = dataclasses.replace(
                self.config, **body, scenario=_coerce(self.config.scenario, scenario)
            )
            return await self._respond(writer, 200, {"ok": True})
        if path == "/_fake/traffic" and method == "GET":
            return await self._respond(writer, 200, self.traffic.state())
        if path == "/_fake/traffic" and method == "POST":
            try:
                traffic = Traffic.from_json(body, self.traffic.traffic)
            except (TypeError, ValueError) as error:
                return await self._respond(writer, 400, _error(f"traffic: {error}", 400))
            self.config = dataclasses.replace(self.config, engine_metrics=True)
            task = self.traffic.set(traffic)
            if task is not None:  # stop() cancels it with the connections
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            return await self._respond(writer, 200, self.traffic.state())
        if path == "/_fake/reset" and method == "POST":
            self.requests.clear()
            self.max_in_flight = self.in_flight
            self.connections = 0
            return await self._respond(writer, 200, {"ok": True})
        return await self._respond(writer, 404, {"detail": "Not Found"})

    # -- GET endpoints ---------------------------------------------------------------
    def _get(self, path: str) -> tuple[int, Any]:
        config = self.config
        if path == "/v1/models":
            entry: dict[str, Any] = {"id": config.model, "object": "model"}
            if config.engine in ("vllm", "sglang"):
                entry |= {
                    "created": 1_700_000_000,
                    "owned_by": config.engine,
                    "root": config.model,
                    "parent": None,
                    "max_model_len": config.max_model_len,
                }
            else:
                entry |= {"owned_by": "me", "permissions": []}
            return 200, {"object": "list", "data": [entry]}
        if path == "/health":  # vLLM's; GuideLLM asks it before a benchmark
            return 200, {}
        endpoints = {
            ("vllm", "/version"): {"version": config.version},
            ("ollama", "/api/version"): {"version": config.version},
            ("tgi", "/info"): {
                "model_id": config.model,
                "version": config.version,
                "max_total_tokens": config.max_model_len,
            },
            ("sglang", "/get_server_info"): {
                "version": config.version,
                "model_path": config.model,
                "context_length": config.max_model_len,
            },
        }
        found = endpoints.get((config.engine, path))
        return (200, found) if found is not None else (404, {"detail": "Not Found"})

    # -- chat completions ------------------------------------------------------------
    async def _chat(self, record: RecordedRequest, body: Any, writer) -> bool:
        config = self.config
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return await self._respond(
                writer, 400, _error("messages: field required", 400), timing=record.timing
            )
        messages = body["messages"]
        last_user = next(
            (m.get("content") for m in reversed(messages) if m.get("role") == "user"), ""
        )
        try:
            scenario = _coerce(config.scenario, _scenario_overrides(str(last_user or "")))
        except (AttributeError, TypeError, ValueError) as error:
            return await self._respond(
                writer, 400, _error(f"fake directive: {error}", 400), timing=record.timing
            )
        if config.check_model and body.get("model") != config.model:
            message = f"The model `{body.get('model')}` does not exist."
            return await self._respond(
                writer, 404, _error(message, 404, "NotFoundError"), timing=record.timing
            )
        prompt_tokens = sum(len(str(m.get("content") or "").split()) for m in messages)
        max_tokens = body.get("max_tokens")
        if max_tokens is None and scenario.style == "vllm":
            max_tokens = body.get("max_completion_tokens")  # llama.cpp ignores it
        if config.max_model_len is not None:
            wanted = prompt_tokens + (max_tokens or 0)
            if wanted > config.max_model_len:
                message = (
                    f"This model's maximum context length is {config.max_model_len} tokens. "
                    f"However, you requested {wanted} tokens ({prompt_tokens} in the messages, "
                    f"{max_tokens or 0} in the completion). Please reduce the length of the "
                    "messages or completion."
                )
                return await self._respond(writer, 400, _error(message, 400), timing=record.timing)
        if scenario.fault == "http_error":
            message = f"Internal server error (fake fault {scenario.status})"
            answered = await self._respond(
                writer, scenario.status, _error(message, scenario.status), timing=record.timing
            )
            self._observe(record, scenario, None, config)
            return answered
        if scenario.fault == "hang_headers":
            await asyncio.sleep(scenario.hang_s)
            return False
        plan = _Plan.build(body, scenario, max_tokens)
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            try:
                return await _Stream(record, body, scenario, plan, writer).run(
                    include_usage and scenario.usage and scenario.style == "vllm", prompt_tokens
                )
            finally:
                self._observe(record, scenario, plan, config)
        answered = await self._nonstream(record, body, scenario, plan, writer, prompt_tokens)
        self._observe(record, scenario, plan, config)
        return answered

    def _observe(
        self, record: RecordedRequest, scenario: Scenario, plan: _Plan | None, config: ServerConfig
    ) -> None:
        """Count an answered chat into the engine's series, from the server's own log.

        A stream's TTFT and gaps are its chunks' write times. A whole-body answer has
        only its end: its TTFT is the configured one (capped by the end), as an engine
        knows when it produced a token that it did not send. A stream a fault broke, or
        an error answer, finishes as ``abort``; a request refused as invalid counts
        nowhere, as in vLLM. ``config`` is the server's when the request arrived: its
        model name labels the series, and with the engine's metrics off then nothing is
        counted (the benchmark's fake keeps its event loop to the streams it times). A
        test may change the server as soon as it has read the answer, before this runs.
        """
        if not config.engine_metrics:
            return
        timing = record.timing
        end = timing.last_chunk or timing.body_end or time.perf_counter()
        e2e = max(end - timing.received, 0.0)
        if plan is None or scenario.fault in _ABORTING_FAULTS:
            reason = "abort"
        else:
            reason = "length" if plan.finish == "length" else "stop"
        if timing.chunks:
            ttft: float | None = timing.chunks[0] - timing.received
            gaps = [b - a for a, b in itertools.pairwise(timing.chunks)]
        elif plan is not None and plan.pieces and reason != "abort":
            ttft = min(scenario.ttft_ms / 1000, e2e)
            gaps = [scenario.itl_ms / 1000] * (len(plan.pieces) - 1)
        else:
            ttft, gaps = None, []
        self.engine.observe(
            ttft_s=ttft, gaps_s=gaps, e2e_s=e2e, finished_reason=reason, model=config.model
        )

    async def _nonstream(self, record, body, scenario, plan, writer, prompt_tokens) -> bool:
        loop = asyncio.get_running_loop()
        delay = scenario.ttft_ms + max(len(plan.pieces) - 1, 0) * scenario.itl_ms
        await asyncio.sleep(max(record.received_at + delay / 1000 - loop.time(), 0))
        message: dict[str, Any] = {"role": "assistant", "content": None}
        if plan.tool is not None:
            message["tool_calls"] = [
                {
                    "id": plan.tool_id,
                    "type": "function",
                    "function": {"name": plan.tool, "arguments": "".join(plan.pieces)},
                }
            ]
        else:
            message["content"] = "".join(plan.pieces)
        completion = {
            "id": plan.chat_id,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model"),
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": plan.finish}
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": len(plan.pieces),
                "total_tokens": prompt_tokens + len(plan.pieces),
            },
        }
        return await self._respond(writer, 200, completion, timing=record.timing)


# Faults after which the request did not finish as the engine meant it to.
_ABORTING_FAULTS = ("cut", "cut_clean", "malformed", "error_event", "hang", "done_without_finish")


def _error(message: str, code: int, kind: str = "BadRequestError") -> dict[str, Any]:
    if code >= 500:
        kind = "InternalServerError"
    return {"object": "error", "message": message, "type": kind, "param": None, "code": code}


@dataclass
class _Plan:
    """What the answer says: text pieces or a tool call's argument pieces, and why it stops."""

    pieces: list[str]
    finish: str
    tool: str | None
    chat_id: str
    tool_id: str

    @classmethod
    def build(cls, body: dict[str, Any], scenario: Scenario, max_tokens: int | None) -> _Plan:
        output = scenario.output or _auto_output(body)
        tool = None
        if output == "tool_call":
            tool, schema = _pick_tool(body)
            pieces = _pieces(json.dumps(example_for(schema)), _JSON_PIECES)
        elif scenario.reply is not None:
            pieces = _pieces(scenario.reply, _TEXT_PIECES)
        elif output == "refusal":
            pieces = _pieces(REFUSAL_TEXT, _TEXT_PIECES)
        elif output in ("json", "invalid_json", "fenced_json"):
            text = json.dumps(example_for(_response_schema(body)))
            if output == "invalid_json":
                text = text[: max(len(text) // 2, 1)]
            elif output == "fenced_json":
                text = f"```json\n{text}\n```"
            pieces = _pieces(text, _JSON_PIECES)
        else:
            words = (_WORDS[i % len(_WORDS)] for i in range(scenario.tokens))
            pieces = _pieces(" ".join(words), _TEXT_PIECES)
        finish = "tool_calls" if tool else "stop"
        if max_tokens is not None and len(pieces) > max_tokens:
            pieces, finish = pieces[:max_tokens], "length"
        if scenario.fault == "empty":
            pieces = []
        chat_id = f"chatcmpl-{uuid.uuid4()}"
        return cls(pieces, finish, tool, chat_id, f"call_{uuid.uuid4().hex[:24]}")


def _auto_output(body: dict[str, Any]) -> str:
    if body.get("tools") and body.get("tool_choice", "auto") != "none":
        return "tool_call"
    if (body.get("response_format") or {}).get("type") in ("json_schema", "json_object"):
        return "json"
    return "text"


def _pick_tool(body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    tools = body.get("tools") or [
        {"type": "function", "function": {"name": "get_weather", "parameters": {}}}
    ]
    choice = body.get("tool_choice")
    wanted = choice.get("function", {}).get("name") if isinstance(choice, dict) else None
    for tool in tools:
        function = tool.get("function", {})
        if wanted in (None, function.get("name")):
            return function["name"], function.get("parameters") or {"type": "object"}
    raise ValueError(f"tool_choice names an unknown tool {wanted!r}")


def _response_schema(body: dict[str, Any]) -> dict[str, Any]:
    fmt = body.get("response_format") or {}
    schema = (fmt.get("json_schema") or {}).get("schema") or fmt.get("schema")
    return schema or {"type": "object", "properties": {"answer": {"type": "string"}}}


class _Stream:
    """Writes one SSE answer on an HTTP/1.1 chunked body, on a fixed timetable."""

    def __init__(self, record, body, scenario: Scenario, plan: _Plan, writer) -> None:
        self.record = record
        record.response_id = plan.chat_id
        self.model = body.get("model")
        self.scenario = scenario
        self.plan = plan
        self.writer = writer
        self.loop = asyncio.get_running_loop()
        self.created = int(time.time())

    def _chunk(self, choices: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
        chunk = {
            "id": self.plan.chat_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": choices,
        }
        return chunk | extra

    def _event(self, data: Any) -> bytes:
        if isinstance(data, str):
            text = f"data: {data}\n\n"
        elif self.scenario.multiline:
            # Indented JSON breaks only between tokens, so the data lines re-join
            # (with "\n", as SSE requires) into the same document.
            text = "".join(f"data: {line}\n" for line in json.dumps(data, indent=1).split("\n"))
            text += "\n"
        else:
            text = f"data: {json.dumps(data)}\n\n"
        if self.scenario.ping:
            text = ": ping\n\n" + text
        return text.encode()

    def _write(self, payload: bytes) -> None:
        self.writer.write(b"%x\r\n%s\r\n" % (len(payload), payload))

    def _delta_chunk(self, index: int) -> dict[str, Any]:
        piece = self.plan.pieces[index]
        llama = self.scenario.style == "llama-cpp"
        last = index == len(self.plan.pieces) - 1
        if self.plan.tool is None:
            choice = {"index": 0, "delta": {"content": piece}, "logprobs": None}
        else:
            call: dict[str, Any] = {"index": 0, "function": {"arguments": piece}}
            if index == 0 or llama:
                call = {"index": 0, "id": self.plan.tool_id, "type": "function"}
                call["function"] = {"name": self.plan.tool, "arguments": piece}
            delta: dict[str, Any] = {"tool_calls": [call]}
            if llama:
                delta = {"role": None, "content": None, **delta}
                delta["function_call"] = {"name": self.plan.tool, "arguments": piece}
            choice = {"index": 0, "delta": delta, "logprobs": None}
        finish_here = last and not llama and self.scenario.fault != "done_without_finish"
        choice["finish_reason"] = self.plan.finish if finish_here else None
        if finish_here:
            choice["stop_reason"] = None
        return self._chunk([choice])

    async def _sleep_until(self, due: float) -> None:
        delay = due - self.loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        self.record.lateness_ms.append((self.loop.time() - due) * 1000)

    async def run(self, include_usage: bool, prompt_tokens: int) -> bool:
        scenario = self.scenario
        timing = self.record.timing
        head = (
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
            "cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n"
        )
        timing.sent()
        self.writer.write(head.encode())
        if scenario.raw_stream is not None:
            return await self._raw(scenario.raw_stream)
        role: dict[str, Any] = {"role": "assistant"}
        if scenario.style == "vllm":
            role["content"] = ""
        self._write(
            self._event(
                self._chunk([{"index": 0, "delta": role, "logprobs": None, "finish_reason": None}])
            )
        )
        await self.writer.drain()
        if scenario.fault == "hang":
            await asyncio.sleep(scenario.hang_s)
            return False
        start = self.record.received_at + scenario.ttft_ms / 1000
        due = start
        for index in range(len(self.plan.pieces)):
            if index:
                slow = scenario.fault == "drip" and index >= scenario.drip_after
                due += (scenario.drip_gap_ms if slow else scenario.itl_ms) / 1000
            await self._sleep_until(due)
            if index == scenario.cut_after and scenario.fault in ("cut", "cut_clean"):
                timing.sent(end=True)
                if scenario.fault == "cut":
                    self.writer.transport.abort()
                    return False
                self.writer.write(b"0\r\n\r\n")
                await self.writer.drain()
                return True
            if index == scenario.cut_after and scenario.fault == "malformed":
                self._write(b'data: {"id": "chatcmpl-broken", "choices": [{"delta": {"cont\n\n')
            if index == scenario.cut_after and scenario.fault == "error_event":
                error = {"error": _error("fake engine error mid-stream", 500)}
                timing.sent(last=True, end=True)
                self._write(self._event(error) + self._event("[DONE]"))
                self.writer.write(b"0\r\n\r\n")
                await self.writer.drain()
                return True
            timing.chunks.append(time.perf_counter())
            self._write(self._event(self._delta_chunk(index)))
            if index == 0:
                self.record.first_token_at = self.loop.time()
            await self.writer.drain()
        tail = b""
        reported = self._server_timing(prompt_tokens) if scenario.server_timing else {}
        if scenario.fault != "done_without_finish" and (
            scenario.style == "llama-cpp" or not self.plan.pieces
        ):
            finish = {"index": 0, "delta": {}, "logprobs": None, "finish_reason": self.plan.finish}
            extra = reported if scenario.style == "llama-cpp" else {}
            tail += self._event(self._chunk([finish], **extra))
        if include_usage:
            completion = len(self.plan.pieces) * scenario.tokens_per_chunk
            usage = {
                "prompt_tokens": prompt_tokens,
                "total_tokens": prompt_tokens + completion,
                "completion_tokens": completion,
            }
            extra = reported if scenario.style == "vllm" else {}
            tail += self._event(self._chunk([], usage=usage, **extra))
        elif reported and scenario.style == "vllm":
            tail += self._event(self._chunk([], **reported))
        tail += self._event("[DONE]")
        timing.sent(last=True)
        self._write(tail)
        if scenario.linger_ms:
            await self.writer.drain()
            await asyncio.sleep(scenario.linger_ms / 1000)
        timing.sent(end=True)
        self.writer.write(b"0\r\n\r\n")
        await self.writer.drain()
        return True

    def _server_timing(self, prompt_tokens: int) -> dict[str, Any]:
        """The server's own figures, from its log: its TTFT is exactly ``first_chunk_ms``."""
        timing = self.record.timing
        first = timing.first_chunk_ms or 0.0
        last = timing.ms(timing.chunks[-1]) if timing.chunks else first
        if self.scenario.style == "llama-cpp":
            tokens = len(self.plan.pieces)
            return {
                "timings": {
                    "prompt_n": prompt_tokens,
                    "prompt_ms": first,
                    "prompt_per_token_ms": first / max(prompt_tokens, 1),
                    "predicted_n": tokens,
                    "predicted_ms": last - first,
                    "predicted_per_token_ms": (last - first) / max(tokens - 1, 1),
                }
            }
        return {"metrics": {"time_to_first_token_ms": first, "generation_time_ms": last - first}}

    async def _raw(self, recorded: bytes) -> bool:
        """Serve a captured body: its events verbatim, TTFT before the second, ITL after."""
        events = [e + b"\n\n" for e in recorded.replace(b"\r\n", b"\n").split(b"\n\n") if e]
        due = self.record.received_at
        for index, event in enumerate(events):
            if index == 1:
                due += self.scenario.ttft_ms / 1000
            elif index > 1:
                due += self.scenario.itl_ms / 1000
            await self._sleep_until(due)
            self.record.timing.sent(last=index == len(events) - 1)
            self._write(event)
            await self.writer.drain()
        self.record.timing.sent(end=True)
        self.writer.write(b"0\r\n\r\n")
        await self.writer.drain()
        return True


class FakeOpenAI:
    """The fake server on its own event loop in a daemon thread; a context manager."""

    def __init__(self, config: ServerConfig | None = None, **scenario: Any) -> None:
        config = config or ServerConfig()
        if scenario:
            config = dataclasses.replace(config, scenario=Scenario(**scenario))
        self.handler = _Handler(config)
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def config(self) -> ServerConfig:
        return self.handler.config

    @property
    def requests(self) -> list[RecordedRequest]:
        return self.handler.requests

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.handler.requests if r.path == "/v1/chat/completions"]

    def timing_of(self, request_id: str) -> Timing:
        """The server's log of the chat request the client sent with this X-Request-Id."""
        (record,) = (r for r in self.chat_requests if r.headers.get("x-request-id") == request_id)
        return record.timing

    def wait_for_chat_requests(self, count: int, timeout: float = 30) -> None:
        """Block until ``count`` chat requests have arrived: a test's cue, not a sleep."""
        with self.handler.arrivals:
            if not self.handler.arrivals.wait_for(
                lambda: len(self.chat_requests) >= count, timeout
            ):
                raise AssertionError(f"{count} chat request(s) did not arrive in {timeout} s")

    @property
    def max_in_flight(self) -> int:
        return self.handler.max_in_flight

    @property
    def connections(self) -> int:
        return self.handler.connections

    def configure(self, **changes: Any) -> None:
        """Change the server (model, max_model_len, ...) or its default scenario fields."""
        server_fields = {f.name for f in dataclasses.fields(ServerConfig)}
        server = {k: v for k, v in changes.items() if k in server_fields}
        scenario = {k: v for k, v in changes.items() if k not in server_fields}
        config = dataclasses.replace(self.handler.config, **server)
        self.handler.config = dataclasses.replace(
            config, scenario=dataclasses.replace(config.scenario, **scenario)
        )

    def start(self) -> FakeOpenAI:
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        async def listen() -> None:
            server = await asyncio.start_server(
                self.handler.serve, "127.0.0.1", self.port, limit=1 << 24
            )
            self.port = server.sockets[0].getsockname()[1]
            self._server = server
            ready.set()

        def run() -> None:
            assert self._loop is not None
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(listen())
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="fake-openai", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("fake OpenAI server did not start")
        return self

    def stop(self) -> None:
        loop = self._loop
        if loop is None or self._thread is None:
            return

        async def shutdown() -> None:
            self._server.close()
            for task in list(self.handler._tasks):
                task.cancel()
            await asyncio.gather(*self.handler._tasks, return_exceptions=True)
            loop.stop()

        asyncio.run_coroutine_threadsafe(shutdown(), loop)
        self._thread.join(10)
        loop.close()
        self._loop = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def fake_openai_process(*args: str, timeout: float = 15) -> Iterator[str]:
    """The fake server in a child process (own CPU and GIL); yields its base URL."""
    port = free_port()
    command = [sys.executable, "-m", "tests.support.fake_openai", "--port", str(port), *args]
    # prometheus_client would keep the engine's series in files under this folder.
    process = subprocess.Popen(command, cwd=ROOT, env=child_env(PROMETHEUS_MULTIPROC_DIR=None))
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                with urllib.request.urlopen(f"{base}/_fake/stats", timeout=1):
                    break
            except (urllib.error.URLError, ConnectionError):
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("fake OpenAI process did not start") from None
                time.sleep(0.05)
        yield base
    finally:
        process.terminate()
        process.wait(10)


def set_traffic(base_url: str, **traffic: float) -> dict[str, Any]:
    """``POST /_fake/traffic``: e.g. ``set_traffic(url, rps=20, ttft_ms=200)``; ``rps=0`` stops.

    Fields left out keep their values (engine_metrics.Traffic). Answers the server's
    traffic state, with ``recorded``: how many synthetic requests it has counted so far.
    """
    request = urllib.request.Request(
        f"{base_url}/_fake/traffic",
        data=json.dumps(traffic).encode(),
        headers={"content-type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)


@dataclass(frozen=True)
class FakeEngine:
    """A fake engine (usually a ``fake_openai_process``) as a rollout test steers it."""

    base_url: str
    model: str

    @property
    def target(self) -> str:
        """host:port, as a Prometheus scrape config names it."""
        return self.base_url.removeprefix("http://")

    def traffic(self, **traffic: float) -> dict[str, Any]:
        """``set_traffic`` on this engine: ``engine.traffic(rps=20, ttft_ms=600)``."""
        return set_traffic(self.base_url, **traffic)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model", default="fake-model")
    parser.add_argument("--ttft-ms", type=float, default=0.0)
    parser.add_argument("--itl-ms", type=float, default=0.0)
    parser.add_argument("--tokens", type=int, default=8)
    parser.add_argument("--max-concurrent", type=int, default=None)
    parser.add_argument(
        "--engine-metrics",
        action="store_true",
        help="serve vLLM-named series at /metrics (POST /_fake/traffic turns it on too)",
    )
    options = parser.parse_args()
    scenario = Scenario(ttft_ms=options.ttft_ms, itl_ms=options.itl_ms, tokens=options.tokens)
    config = ServerConfig(
        model=options.model,
        scenario=scenario,
        engine_metrics=options.engine_metrics,
        max_concurrent=options.max_concurrent,
    )
    handler = _Handler(config)

    async def serve() -> None:
        server = await asyncio.start_server(
            handler.serve, "127.0.0.1", options.port, limit=1 << 24, backlog=1024
        )
        async with server:
            await server.serve_forever()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())


if __name__ == "__main__":
    main()
