"""A webhook receiver on loopback: a real HTTP server in a thread that records every POST
(its body, its headers, when it came) and answers from a script of status codes."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Received:
    body: bytes
    headers: dict[str, str]
    at: float


@dataclass
class Receiver:
    url: str
    # Status codes to answer, in order; once used up, `then` for every request.
    script: list[int] = field(default_factory=list)
    then: int = 200
    received: list[Received] = field(default_factory=list)

    def wait_for(self, count: int, timeout: float) -> list[Received]:
        deadline = time.monotonic() + timeout
        while len(self.received) < count:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out after {timeout}s waiting for {count} requests; got "
                    f"{len(self.received)}"
                )
            time.sleep(0.05)
        return self.received


class _Handler(BaseHTTPRequestHandler):
    receiver: Receiver

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length)
        receiver = self.server.receiver  # type: ignore[attr-defined]
        receiver.received.append(
            Received(body, {k.lower(): v for k, v in self.headers.items()}, time.monotonic())
        )
        status = receiver.script.pop(0) if receiver.script else receiver.then
        self.send_response(status)
        self.send_header("content-length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, format: str, *args: object) -> None:
        pass


class receiving:
    """`with receiving(script=[500, 500]) as receiver:` — a server on 127.0.0.1."""

    def __init__(self, script: list[int] | None = None, then: int = 200) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        port = self.server.server_address[1]
        self.receiver = Receiver(f"http://127.0.0.1:{port}/hooks", list(script or []), then)
        self.server.receiver = self.receiver  # type: ignore[attr-defined]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self.receiver

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)
