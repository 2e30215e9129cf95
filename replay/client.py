"""The replay client: streamed chat completions against an OpenAI-compatible backend.

No Django here: the task layer builds a ``BackendConfig`` and ``ChatRequest``s from its
rows, calls ``replay_many`` (or ``replay_many_sync``) and stores the ``ReplayResult``s.

Timing (``time.perf_counter``), from the moment the request's body is written to
the socket (httpcore's trace hook), so that building the request, waiting for a
pooled connection and connecting are not counted as the server's time (they still
count against the deadlines, which run from just before the request is built).
Every moment after it is the one at which the network read that carried it
returned, taken before the bytes are decoded, split into SSE events or parsed as
JSON: parsing costs and a busy event loop between two events of one read never
count as the server's time.
- TTFT: to the first chunk carrying content, reasoning or a tool-call delta. The
  role-only first chunk (``{"role": "assistant", "content": ""}``) does not count.
- ITL: between consecutive token-carrying chunks.
- e2e: to ``[DONE]``, or to the end of the body when a server sends none.
- Server-side TTFT, when the server reports one: vLLM's per-request ``metrics``
  (``time_to_first_token_ms``; vLLM 0.25+ started with ``--enable-per-request-metrics``
  sends it when the request asks, ``include_metrics: true`` in a sample's params),
  llama.cpp server's ``timings`` (``prompt_ms``: prompt processing, the server's time
  to its first token without queueing). Kept beside the client's figure, never
  instead. (No SGLang field is read: none was found documented.)
- TPOT: (e2e - TTFT) / (output tokens - 1), output tokens from the usage block when
  the server sends one (llama.cpp never does), else the token-carrying chunks counted.

Outcome rules that go beyond the wire format:
- A stream with no ``finish_reason`` is ``stream_interrupted`` even when it ends with
  ``[DONE]``: that is how llama.cpp ends a stream another request cut short.
- A finished stream whose connection drops before ``[DONE]`` is kept as ok.
- An in-stream error object (vLLM: ``data: {"error": {...}}``) becomes ``http_<code>``
  when it carries an HTTP status, else ``stream_interrupted``.
- Idle time is measured between data events; ``: ping`` comments do not reset it,
  so a server that only keeps the connection alive still times out.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import inspect
import logging
import math
import re
import ssl
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any, Literal

import httpx
import orjson

# The SSE line splitter and event decoder behind httpx_sse.EventSource, fed here with
# bytes this module timestamps itself (EventSource reads the response on its own).
from httpx_sse._decoders import SSEDecoder, SSELineDecoder

from replay import stats
from replay.outbound import DestinationPolicy, guarded_client

logger = logging.getLogger(__name__)

_SNIPPET_CHARS = 300
_DRAIN_SECONDS = 1.0
_ERROR_BODY_BYTES = 4096
_TIMING_KEYS = 32  # of a server timing object, kept
_RESERVED_PARAMS = ("model", "messages", "stream", "stream_options")
_HTTP_CODE = re.compile(r"^http_[1-5]\d\d$")


class ErrorCode(StrEnum):
    """Fixed error codes; HTTP failures are ``http_<status>`` (see ``http_error_code``)."""

    CONNECT_ERROR = "connect_error"
    TIMEOUT_FIRST_TOKEN = "timeout_first_token"  # noqa: S105 (a token of output)
    TIMEOUT_IDLE = "timeout_idle"
    TIMEOUT_TOTAL = "timeout_total"
    STREAM_INTERRUPTED = "stream_interrupted"
    MALFORMED_CHUNK = "malformed_chunk"
    EMPTY_OUTPUT = "empty_output"
    CHECK_FAILED = "check_failed"


def http_error_code(status: int) -> str:
    return f"http_{status}"


def is_error_code(value: str) -> bool:
    """Whether ``value`` is a code this module can produce (for model field validation)."""
    return value in ErrorCode._value2member_map_ or bool(_HTTP_CODE.match(value))


@dataclass(frozen=True)
class Timeouts:
    """Seconds. ``first_token`` and ``total`` run from the moment the request is sent."""

    connect: float = 10.0
    first_token: float = 60.0
    idle: float = 30.0
    total: float = 600.0


@dataclass(frozen=True)
class BackendConfig:
    base_url: str  # with or without a trailing /v1
    model: str
    credential: str | None = field(default=None, repr=False)  # the secret value itself
    concurrency: int = 4
    timeouts: Timeouts = field(default_factory=Timeouts)
    # Where connections may go (replay.outbound); None: the settings' REPLAY_ALLOWED_HOSTS.
    destinations: DestinationPolicy | None = None

    def __post_init__(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError("base_url: must start with http:// or https://")
        if not self.model:
            raise ValueError("model: the served model name is required")
        if self.concurrency < 1:
            raise ValueError("concurrency: must be at least 1")

    @property
    def api_root(self) -> str:
        return api_root(self.base_url)


def api_root(base_url: str) -> str:
    """The server root: OpenAI clients are often configured with ``.../v1`` already."""
    root = base_url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


@dataclass(frozen=True)
class ChatRequest:
    """One sample as sent: messages, generation params (temperature, max_tokens, ...)."""

    messages: list[dict[str, Any]]
    params: dict[str, Any] = field(default_factory=dict)
    response_format: dict[str, Any] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None

    def body(self, model: str) -> dict[str, Any]:
        for key in _RESERVED_PARAMS:
            if key in self.params:
                raise ValueError(f"params.{key}: set by the replay client, not by a sample")
        if self.params.get("n", 1) != 1:
            raise ValueError("params.n: only one choice per request is replayed")
        body: dict[str, Any] = {"model": model, "messages": self.messages, **self.params}
        for key in ("response_format", "tools", "tool_choice"):
            if getattr(self, key) is not None:
                body[key] = getattr(self, key)
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
        return body


@dataclass
class ToolCall:
    id: str | None
    name: str
    arguments: str  # the JSON text as streamed, assembled from the deltas


@dataclass
class ReplayResult:
    outcome: Literal["ok", "error"] = "ok"
    error_code: str | None = None
    error_detail: str = ""
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None
    itl_ms: list[float] = field(default_factory=list)
    output_tokens: int | None = None
    output_tokens_source: Literal["usage", "counted"] | None = None
    prompt_tokens: int | None = None
    finish_reason: str | None = None
    output_text: str = ""
    reasoning_text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    served_model: str | None = None  # the `model` the chunks report, for drift
    # What the server says its own TTFT was, and the object it said it in.
    server_ttft_ms: float | None = None
    server_timing: dict[str, Any] = field(default_factory=dict)
    saw_done: bool = False
    request_id: str = ""  # sent as X-Request-Id, to find the request in server logs

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"

    def to_dict(self, *, itl: Literal["full", "summary"] = "summary") -> dict[str, Any]:
        """JSON-storable; ``itl="summary"`` replaces the ITL list by its percentiles."""
        data = asdict(self)
        if itl == "summary":
            data.pop("itl_ms")
            data["itl_ms_summary"] = stats.summarize(self.itl_ms)
        return data


class _Deadline(Exception):
    def __init__(self, code: ErrorCode, seconds: float) -> None:
        self.code = code
        self.seconds = seconds


@dataclass
class _Stream:
    """Running state of one streamed answer."""

    started: float  # deadlines run from here: connecting counts against them
    result: ReplayResult
    sent: float | None = None  # the request's body was written: latencies run from here
    last_token: float | None = None
    last_event: float | None = None
    done_at: float | None = None
    counted: int = 0
    usage_tokens: int | None = None
    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: dict[int, ToolCall] = field(default_factory=dict)
    secret: str | None = field(default=None, repr=False)  # redacted from snippets

    @property
    def origin(self) -> float:
        return self.started if self.sent is None else self.sent

    async def trace(self, event: str, info: dict[str, Any]) -> None:
        """httpcore's trace hook: note when the request goes out whole.

        The body (one piece: the JSON document) is written right after this event
        with no await in between; its ``.complete`` comes only after a checkpoint that
        lets the other streams run first, which would hide their time in this TTFT.
        """
        if event.endswith(".send_request_body.started"):
            self.sent = time.perf_counter()


def _redact(text: str, secret: str | None) -> str:
    if secret:
        text = text.replace(secret, "[redacted]")
    return text


def _snippet(text: str, secret: str | None = None) -> str:
    # Redact before cutting: a key straddling the cut would otherwise survive in part.
    text = " ".join(_redact(text, secret).split())
    return text if len(text) <= _SNIPPET_CHARS else text[:_SNIPPET_CHARS] + "…"


def _headers(backend: BackendConfig, request_id: str) -> dict[str, str]:
    # llama.cpp refuses a non-UUID X-Request-Id with HTTP 400.
    headers = {"Content-Type": "application/json", "X-Request-Id": request_id}
    if backend.credential:
        headers["Authorization"] = f"Bearer {backend.credential}"
    return headers


def make_client(
    backend: BackendConfig, *, connections: int | None = None, verify: ssl.SSLContext | bool = True
) -> httpx.AsyncClient:
    """An httpx client for the backend, connecting only where replay.outbound allows;
    read deadlines are enforced by ``replay_one`` itself."""
    t = backend.timeouts
    size = connections or backend.concurrency
    return guarded_client(
        timeout=httpx.Timeout(connect=t.connect, read=None, write=t.idle, pool=None),
        limits=httpx.Limits(max_connections=size, max_keepalive_connections=size),
        verify=verify,
        policy=backend.destinations,
    )


async def replay_one(
    backend: BackendConfig, request: ChatRequest, *, client: httpx.AsyncClient | None = None
) -> ReplayResult:
    """Send one streamed chat completion and measure it; never raises for backend faults."""
    body = request.body(backend.model)
    if client is None:
        async with make_client(backend) as own:
            return await replay_one(backend, request, client=own)
    result = ReplayResult(request_id=str(uuid.uuid4()))
    state = _Stream(started=time.perf_counter(), result=result, secret=backend.credential)
    try:
        await _stream(backend, body, client, state)
    except _Deadline as deadline:
        _fail(result, deadline.code, f"no {_WAITED_FOR[deadline.code]} within {deadline.seconds}s")
    except (httpx.ConnectError, httpx.ConnectTimeout, httpx.UnsupportedProtocol) as error:
        _fail(result, ErrorCode.CONNECT_ERROR, f"{type(error).__name__}: {error}")
    except httpx.HTTPError as error:
        # The peer went away mid-exchange (RemoteProtocolError, ReadError, WriteError...).
        if result.finish_reason is None:
            message = f"connection lost before the stream finished ({type(error).__name__})"
            _fail(result, ErrorCode.STREAM_INTERRUPTED, message)
    except UnicodeDecodeError as error:
        _fail(result, ErrorCode.MALFORMED_CHUNK, f"stream is not UTF-8: {error}")
    _finish(state)
    # A server may echo what it was sent (error bodies, even answers): none of it may
    # carry the credential on into results, pages or logs.
    secret = backend.credential
    result.error_detail = _redact(result.error_detail, secret)
    if secret and secret in result.output_text + result.reasoning_text:
        result.output_text = _redact(result.output_text, secret)
        result.reasoning_text = _redact(result.reasoning_text, secret)
    for call in result.tool_calls:
        call.name = _redact(call.name, secret)
        call.arguments = _redact(call.arguments, secret)
    if result.error_code:
        logger.info("replay %s: %s", result.request_id, result.error_code)
    return result


_WAITED_FOR = {
    ErrorCode.TIMEOUT_FIRST_TOKEN: "first token",
    ErrorCode.TIMEOUT_IDLE: "chunk after the previous one",
    ErrorCode.TIMEOUT_TOTAL: "end of stream",
}


def _fail(result: ReplayResult, code: str, detail: str) -> None:
    if result.error_code is None:
        result.outcome = "error"
        result.error_code = str(code)
        result.error_detail = detail


def _next_deadline(backend: BackendConfig, state: _Stream) -> tuple[float, ErrorCode, float]:
    t = backend.timeouts
    if state.last_token is None:
        waiting = (state.started + t.first_token, ErrorCode.TIMEOUT_FIRST_TOKEN, t.first_token)
    else:
        assert state.last_event is not None
        waiting = (state.last_event + t.idle, ErrorCode.TIMEOUT_IDLE, t.idle)
    total = (state.started + t.total, ErrorCode.TIMEOUT_TOTAL, t.total)
    return waiting if waiting[0] <= total[0] else total


async def _stream(
    backend: BackendConfig, body: dict[str, Any], client: httpx.AsyncClient, state: _Stream
) -> None:
    loop = asyncio.get_running_loop()
    offset = loop.time() - time.perf_counter()  # asyncio deadlines use the loop's clock
    at, code, seconds = _next_deadline(backend, state)
    try:
        async with asyncio.timeout_at(at + offset) as scope:
            async with client.stream(
                "POST",
                f"{backend.api_root}/v1/chat/completions",
                content=orjson.dumps(body),
                headers=_headers(backend, state.result.request_id),
                extensions={"trace": state.trace},
            ) as response:
                if response.status_code != 200:
                    await _http_error(response, state.result, state.secret)
                    return
                content_type = response.headers.get("content-type", "")
                if not content_type.startswith("text/event-stream"):
                    detail = f"expected text/event-stream, got {content_type or 'no content-type'}"
                    _fail(state.result, ErrorCode.MALFORMED_CHUNK, detail)
                    return
                lines, events = SSELineDecoder(), SSEDecoder()
                text = codecs.getincrementaldecoder("utf-8")()
                reads = response.aiter_bytes()
                async with contextlib.aclosing(reads):  # type: ignore[type-var]
                    async for raw in reads:
                        # The moment these bytes arrived, before any decoding.
                        arrived = time.perf_counter()
                        if state.done_at is not None:
                            continue
                        for line in lines.decode(text.decode(raw)):
                            event = events.decode(line)
                            if event is None:
                                continue
                            state.last_event = arrived
                            if _on_event(event.data, state, arrived):
                                continue
                            if not state.result.saw_done:
                                return
                            # Read on to the end of the body: a response left unread
                            # costs its connection, and the next request a new one.
                            state.done_at = arrived
                            scope.reschedule(loop.time() + _DRAIN_SECONDS)
                            break
                        else:
                            at, code, seconds = _next_deadline(backend, state)
                            scope.reschedule(at + offset)
    except TimeoutError:
        if state.done_at is not None:
            return  # the body stayed open after [DONE]; nothing of the answer is missing
        raise _Deadline(code, seconds) from None


async def _http_error(response: httpx.Response, result: ReplayResult, secret: str | None) -> None:
    raw = b""
    async for part in response.aiter_bytes():
        raw += part
        if len(raw) >= _ERROR_BODY_BYTES:
            break
    text = raw[:_ERROR_BODY_BYTES].decode("utf-8", "replace")
    try:
        parsed = orjson.loads(text)
    except orjson.JSONDecodeError:
        parsed = None
    message = _error_message(parsed) or text
    _fail(result, http_error_code(response.status_code), _snippet(message, secret))


def _error_message(parsed: Any) -> str | None:
    if not isinstance(parsed, dict):
        return None
    error = parsed.get("error")
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return error["message"]
    if isinstance(parsed.get("message"), str):
        return parsed["message"]
    return None


def _server_timing(chunk: dict[str, Any], result: ReplayResult) -> None:
    """Keep a server's own timing object, and its TTFT figure, when the chunk has one.

    Only the object's numbers are kept (it is stored as JSON, and a server could put
    anything in it); its TTFT figure must be a number of milliseconds, not negative.
    """
    for name, ttft_key in (("metrics", "time_to_first_token_ms"), ("timings", "prompt_ms")):
        reported = chunk.get(name)
        if not isinstance(reported, dict):
            continue
        ttft = reported.get(ttft_key)
        if not isinstance(ttft, int | float) or not _number(ttft) or ttft < 0:
            continue
        numbers = {
            key: value
            for key, value in list(reported.items())[:_TIMING_KEYS]
            if isinstance(key, str) and key.isprintable() and _number(value)
        }
        result.server_timing = {name: numbers}
        result.server_ttft_ms = float(ttft)
        return


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _on_event(data: str, state: _Stream, arrived: float) -> bool:
    """Fold one SSE data payload, read at ``arrived``, into the state; False once the
    stream is over."""
    result = state.result
    if not data:
        return True  # an event with no data is a keep-alive
    if data == "[DONE]":
        result.saw_done = True
        return False
    try:
        chunk = orjson.loads(data)
    except orjson.JSONDecodeError as error:
        _fail(result, ErrorCode.MALFORMED_CHUNK, f"{error}: {_snippet(data, state.secret)}")
        return False
    if not isinstance(chunk, dict):
        _fail(
            result,
            ErrorCode.MALFORMED_CHUNK,
            f"chunk is not an object: {_snippet(data, state.secret)}",
        )
        return False
    if "error" in chunk and not chunk.get("choices"):
        stream_error = chunk["error"]
        status = stream_error.get("code") if isinstance(stream_error, dict) else None
        message = _snippet(_error_message(chunk) or data, state.secret)
        if isinstance(status, int) and 400 <= status <= 599:
            _fail(result, http_error_code(status), f"error event in stream: {message}")
        else:
            _fail(result, ErrorCode.STREAM_INTERRUPTED, f"error event in stream: {message}")
        return False
    if isinstance(chunk.get("model"), str):
        result.served_model = chunk["model"]
    if "metrics" in chunk or "timings" in chunk:
        _server_timing(chunk, result)
    usage = chunk.get("usage")
    if isinstance(usage, dict):
        if isinstance(usage.get("completion_tokens"), int):
            state.usage_tokens = usage["completion_tokens"]
        if isinstance(usage.get("prompt_tokens"), int):
            result.prompt_tokens = usage["prompt_tokens"]
    choices = chunk.get("choices") or []
    if not isinstance(choices, list):
        _fail(
            result,
            ErrorCode.MALFORMED_CHUNK,
            f"choices is not a list: {_snippet(data, state.secret)}",
        )
        return False
    for choice in choices:
        # Only the first choice is replayed (n=1 is enforced on the request).
        if not isinstance(choice, dict) or choice.get("index", 0) != 0:
            continue
        delta = choice.get("delta") or {}
        if not isinstance(delta, dict):
            _fail(
                result,
                ErrorCode.MALFORMED_CHUNK,
                f"delta is not an object: {_snippet(data, state.secret)}",
            )
            return False
        if _on_delta(delta, state):
            if state.last_token is None:
                result.ttft_ms = (arrived - state.origin) * 1000
            else:
                result.itl_ms.append((arrived - state.last_token) * 1000)
            state.last_token = arrived
            state.counted += 1
        if choice.get("finish_reason") is not None:
            result.finish_reason = str(choice["finish_reason"])
    return True


def _on_delta(delta: dict[str, Any], state: _Stream) -> bool:
    """Collect a delta's text and tool-call pieces; True when it carried any token."""
    carried = False
    content = delta.get("content")
    if isinstance(content, str) and content:
        state.text.append(content)
        carried = True
    reasoning = delta.get("reasoning_content") or delta.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        state.reasoning.append(reasoning)
        carried = True
    for part in delta.get("tool_calls") or []:
        if not isinstance(part, dict):
            continue
        call = state.calls.setdefault(part.get("index", 0), ToolCall(None, "", ""))
        call.id = part.get("id") or call.id
        function = part.get("function") or {}
        # OpenAI and vLLM send the name once; llama.cpp repeats the whole name in every
        # delta, so a repeat is not appended.
        name = function.get("name")
        if isinstance(name, str) and name and name != call.name:
            call.name += name
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            call.arguments += arguments
        if name or arguments:
            carried = True
    return carried


def _finish(state: _Stream) -> None:
    result = state.result
    if state.done_at is not None:
        result.e2e_ms = (state.done_at - state.origin) * 1000
    elif state.last_event is not None:
        result.e2e_ms = (time.perf_counter() - state.origin) * 1000
    result.output_text = "".join(state.text)
    result.reasoning_text = "".join(state.reasoning)
    result.tool_calls = [state.calls[i] for i in sorted(state.calls)]
    if state.usage_tokens is not None:
        result.output_tokens, result.output_tokens_source = state.usage_tokens, "usage"
    elif state.counted:
        result.output_tokens, result.output_tokens_source = state.counted, "counted"
    tokens = result.output_tokens or 0
    if result.ttft_ms is not None and result.e2e_ms is not None and tokens > 1:
        result.tpot_ms = (result.e2e_ms - result.ttft_ms) / (tokens - 1)
    if result.error_code is not None:
        return
    if result.finish_reason is None:
        how = "ended with [DONE]" if result.saw_done else "ended"
        _fail(result, ErrorCode.STREAM_INTERRUPTED, f"stream {how} without a finish_reason")
    elif not result.output_text and not result.tool_calls:
        detail = f"finished ({result.finish_reason}) with no content and no tool call"
        _fail(result, ErrorCode.EMPTY_OUTPUT, detail)


OnResult = Callable[[int, ReplayResult], Awaitable[None] | None]


async def replay_many(
    backend: BackendConfig,
    requests: Sequence[ChatRequest],
    *,
    on_result: OnResult | None = None,
    limiter: asyncio.Semaphore | None = None,
    client: httpx.AsyncClient | None = None,
) -> list[ReplayResult]:
    """Replay every request, at most ``backend.concurrency`` at once; results in input order.

    ``on_result(index, result)`` (sync or async) runs as each request completes, so a
    caller can store results as they come and resume an interrupted run. Pass one
    ``limiter`` to several concurrent calls to bound them together.
    """
    for index, request in enumerate(requests):
        try:
            request.body(backend.model)
        except ValueError as error:
            raise ValueError(f"requests[{index}].{error}") from None
    limiter = limiter or asyncio.Semaphore(backend.concurrency)
    results: list[ReplayResult | None] = [None] * len(requests)
    lanes: asyncio.Queue[httpx.AsyncClient] = asyncio.Queue()

    async def run(index: int, request: ChatRequest) -> None:
        async with limiter:
            if client is not None:
                result = await replay_one(backend, request, client=client)
            else:
                lane = await lanes.get()
                try:
                    result = await replay_one(backend, request, client=lane)
                finally:
                    lanes.put_nowait(lane)
        results[index] = result
        if on_result is not None:
            maybe = on_result(index, result)
            if inspect.isawaitable(maybe):
                await maybe

    try:
        async with contextlib.AsyncExitStack() as stack:
            if client is None:
                # One single-connection client per slot: httpcore's pool rescans all of
                # its connections whenever it hands one out or takes one back, which at
                # 64 kept-alive connections tripled the client's CPU time per request.
                verify = httpx.create_ssl_context()  # loading CA files takes ~25 ms: once
                for _ in range(min(backend.concurrency, len(requests))):
                    lane = make_client(backend, connections=1, verify=verify)
                    lanes.put_nowait(await stack.enter_async_context(lane))
            async with asyncio.TaskGroup() as group:
                for index, request in enumerate(requests):
                    group.create_task(run(index, request))
    except BaseExceptionGroup as failed:
        # Only on_result can raise here (replay_one turns backend faults into results).
        raise failed.exceptions[0]  # noqa: B904
    return [result for result in results if result is not None]


def replay_many_sync(
    backend: BackendConfig,
    requests: Sequence[ChatRequest],
    *,
    on_result: OnResult | None = None,
) -> list[ReplayResult]:
    """``replay_many`` for synchronous callers (Celery tasks, management commands)."""
    return asyncio.run(replay_many(backend, requests, on_result=on_result))
