"""How far the replay's TTFT is from the server's own, quiet and under CPU load.

    .venv/bin/python bench/replay_ttft_fidelity.py [--samples 64] [--concurrency 8]
        [--rounds 3] [--load-processes 2] [--runs]

A stub OpenAI-compatible server of its own (not the test suite's fake, nor any of
the replay's code) runs in a child process: it answers every streamed chat request
with a role chunk at once, the first content chunk 50 ms after it read the request,
then one chunk every 10 ms, 32 tokens in all, and logs, per request, when it read
the request and when it wrote the first content byte, on the monotonic clock. That
log is the truth. In the same run, against the same stub, it measures:

- plain: a plain httpx loop (``client.stream`` + ``aiter_lines``, TTFT at the first
  line carrying content): what any careful script gets;
- replay: ``replay.client.replay_many``;
- run (``--runs``, needs a migrated database in DATABASE_URL): the whole path of
  ``manage.py replay``, ``services.execute_run``, results written to the database
  while the streams run.

Each TTFT error is the client's TTFT minus the stub's own for the same request.
Every phase runs quiet, then again while ``--load-processes`` busy processes (started
here, stopped here, never longer than ``--load-seconds``) keep the CPUs busy.
Rounds alternate the clients so that drift in the machine's load hits them alike.

Targets (issue 16): the replay's median TTFT error within 1 ms quiet, and no worse
than the plain loop's + 0.5 ms under load. Exits with status 1 when one is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TTFT_MS = 50.0
ITL_MS = 10.0
TOKENS = 32
MODEL = "stub-model"


# -- the stub server (child process) ------------------------------------------------------


class _Stub:
    def __init__(self) -> None:
        self.log: dict[str, list[float]] = {}  # key -> [read, first content byte written]

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                _method, path, _ = lines[0].split(" ", 2)
                headers = {
                    name.strip().lower(): value.strip()
                    for name, _, value in (line.partition(":") for line in lines[1:] if line)
                }
                length = int(headers.get("content-length", "0"))
                body = await reader.readexactly(length) if length else b""
                read_at = time.monotonic()
                if path == "/log":
                    self._json(writer, self.log)
                elif path == "/reset":
                    self.log = {}
                    self._json(writer, {})
                else:
                    key = json.loads(body)["messages"][-1]["content"]
                    await self._stream(writer, key, read_at, loop)
                await writer.drain()
        writer.close()

    @staticmethod
    def _json(writer: asyncio.StreamWriter, data: object) -> None:
        payload = json.dumps(data).encode()
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\n\r\n%s" % (len(payload), payload)
        )

    async def _stream(self, writer, key: str, read_at: float, loop) -> None:
        def event(delta: dict, finish: str | None = None) -> bytes:
            chunk = {
                "id": "chatcmpl-stub",
                "object": "chat.completion.chunk",
                "model": MODEL,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            data = b"data: %s\n\n" % json.dumps(chunk).encode()
            return b"%x\r\n%s\r\n" % (len(data), data)

        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n" + event({"role": "assistant", "content": ""})
        )
        await writer.drain()
        # Deadlines from the moment the request was read, on the loop's monotonic clock.
        start = loop.time() - (time.monotonic() - read_at)
        for index in range(TOKENS):
            delay = start + (TTFT_MS + index * ITL_MS) / 1000 - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            last = index == TOKENS - 1
            data = event({"content": f" t{index}"}, "stop" if last else None)
            if index == 0:
                self.log[key] = [read_at, time.monotonic()]
            writer.write(data)
            await writer.drain()
        done = b"data: [DONE]\n\n"
        writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(done), done))


def serve(port: int) -> None:
    stub = _Stub()

    async def main() -> None:
        server = await asyncio.start_server(stub.serve, "127.0.0.1", port, backlog=1024)
        async with server:
            await server.serve_forever()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())


@contextlib.contextmanager
def stub_process() -> Iterator[str]:
    from tests.support.processes import free_port

    port = free_port()
    command = [sys.executable, __file__, "--serve", str(port)]
    process = subprocess.Popen(command, cwd=ROOT)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                _get(base, "/log")
                break
            except OSError:
                time.sleep(0.05)
        else:
            raise RuntimeError("the stub did not start")
        yield base
    finally:
        process.terminate()
        process.wait(10)


def _get(base: str, path: str) -> dict:
    # base is the stub's own http://127.0.0.1:<port>, never user input.
    with urllib.request.urlopen(base + path, timeout=10) as response:  # noqa: S310
        return json.loads(response.read())


def truth_ms(base: str) -> dict[str, float]:
    return {key: (first - read) * 1000 for key, (read, first) in _get(base, "/log").items()}


# -- background load ----------------------------------------------------------------------


def _spin(until: float) -> None:
    while time.monotonic() < until:
        pass


@contextlib.contextmanager
def cpu_load(processes: int, seconds: float) -> Iterator[None]:
    """``processes`` busy loops that stop by themselves after ``seconds`` at the latest."""
    until = time.monotonic() + seconds
    workers = [multiprocessing.Process(target=_spin, args=(until,)) for _ in range(processes)]
    for worker in workers:
        worker.start()
    try:
        time.sleep(0.5)  # let the scheduler see them
        yield
    finally:
        for worker in workers:
            worker.terminate()
            worker.join(5)


# -- the clients --------------------------------------------------------------------------


def keys(label: str, count: int) -> list[str]:
    return [f"{label}-{time.monotonic_ns()}-{i}" for i in range(count)]


def plain_httpx(base: str, prompts: list[str], concurrency: int) -> dict[str, float]:
    import httpx

    ttfts: dict[str, float] = {}

    async def worker(client: httpx.AsyncClient, queue: list[str]) -> None:
        while queue:
            key = queue.pop()
            body = {
                "model": MODEL,
                "stream": True,
                "messages": [{"role": "user", "content": key}],
            }
            start = time.perf_counter()
            async with client.stream("POST", f"{base}/v1/chat/completions", json=body) as r:
                async for line in r.aiter_lines():
                    if key not in ttfts and line.startswith("data: {"):
                        delta = json.loads(line[6:])["choices"][0]["delta"]
                        if delta.get("content"):
                            ttfts[key] = (time.perf_counter() - start) * 1000

    async def run() -> None:
        queue = list(reversed(prompts))
        limits = httpx.Limits(max_connections=concurrency)
        async with httpx.AsyncClient(limits=limits, timeout=60) as client:
            await asyncio.gather(*(worker(client, queue) for _ in range(concurrency)))

    asyncio.run(run())
    return ttfts


def replay_client(base: str, prompts: list[str], concurrency: int) -> dict[str, float]:
    from replay.client import BackendConfig, ChatRequest, Timeouts, replay_many
    from replay.outbound import DestinationPolicy

    backend = BackendConfig(
        base,
        MODEL,
        concurrency=concurrency,
        timeouts=Timeouts(connect=5, first_token=30, idle=30, total=120),
        destinations=DestinationPolicy(["127.0.0.1"]),
    )
    requests = [ChatRequest(messages=[{"role": "user", "content": key}]) for key in prompts]
    results = asyncio.run(replay_many(backend, requests))
    assert all(r.ok for r in results), [r.error_detail for r in results if not r.ok][:3]
    return {key: r.ttft_ms for key, r in zip(prompts, results, strict=True) if r.ttft_ms}


class RunPath:
    """``services.execute_run`` on a backend pointing at the stub: results in the database."""

    def __init__(self, base: str, concurrency: int) -> None:
        import factory

        from replay import services
        from tests.ledger import factories
        from tests.ledger.factories import RevisionFactory

        # The factories number their names from 0 in each process: start past the
        # rows an earlier run of the benchmark left in the database.
        for value in vars(factories).values():
            if isinstance(value, type) and issubclass(value, factory.Factory):
                value.reset_sequence(time.time_ns() // 1000)

        self.services = services
        self.concurrency = concurrency
        self.backend = services.create_backend(
            actor=None,
            name=f"ttft-bench-{time.monotonic_ns()}",
            revision=RevisionFactory(),
            base_url=base,
            model_name=MODEL,
            concurrency_limit=concurrency,
        )

    def __call__(self, base: str, prompts: list[str], concurrency: int) -> dict[str, float]:
        lines = "".join(
            json.dumps(
                {
                    "key": f"s{i}",
                    "category": "short_qa",
                    "messages": [{"role": "user", "content": key}],
                }
            )
            + "\n"
            for i, key in enumerate(prompts)
        )
        name = f"ttft-bench-{time.monotonic_ns()}"
        sample_set, _ = self.services.import_sample_set(actor=None, name=name, jsonl=lines)
        run = self.services.start_run(
            actor=None, backend=self.backend, sample_set=sample_set, enqueue=False
        )
        run = self.services.execute_run(run.pk)
        rows = run.results.select_related("sample")
        assert run.results.count() == len(prompts), run.summary
        return {r.sample.messages[-1]["content"]: r.ttft_ms for r in rows if r.ttft_ms}


# -- the benchmark ------------------------------------------------------------------------


def errors(measured: dict[str, float], truth: dict[str, float]) -> list[float]:
    return [measured[key] - truth[key] for key in measured if key in truth]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--load-processes", type=int, default=2)
    parser.add_argument("--load-seconds", type=float, default=180, help="upper bound of the load")
    parser.add_argument(
        "--runs", action="store_true", help="also the full run path (DATABASE_URL, migrated)"
    )
    options = parser.parse_args()
    if options.serve:
        serve(options.serve)
        return 0

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()

    with stub_process() as base:
        clients: dict[str, object] = {"plain": plain_httpx, "replay": replay_client}
        if options.runs:
            clients["run"] = RunPath(base, options.concurrency)
        replay_client(base, keys("warm", options.concurrency), options.concurrency)
        plain_httpx(base, keys("warm", options.concurrency), options.concurrency)
        figures: dict[tuple[str, str], list[float]] = {}
        load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"machine: {os.cpu_count()} CPUs, load average {load} before the benchmark")
        print(
            f"stub: TTFT {TTFT_MS:g} ms, ITL {ITL_MS:g} ms, {TOKENS} tokens; "
            f"{options.samples} samples at concurrency {options.concurrency}, "
            f"{options.rounds} rounds per client and condition"
        )
        conditions = ("quiet", f"{options.load_processes} busy processes")
        for condition in conditions:
            loaded = condition != "quiet"
            context = (
                cpu_load(options.load_processes, options.load_seconds)
                if loaded
                else contextlib.nullcontext()
            )
            with context:
                for round_number in range(options.rounds):
                    for label, client in clients.items():
                        prompts = keys(f"{label}{round_number}", options.samples)
                        measured = client(base, prompts, options.concurrency)  # type: ignore[operator]
                        figures.setdefault((condition, label), []).extend(
                            errors(measured, truth_ms(base))
                        )
                if loaded:
                    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
                    print(f"load average at the end of the loaded phase: {load}")
        missed = []
        for condition in conditions:
            print(f"\n[{condition}] TTFT error = client - stub, ms")
            for label in clients:
                values = sorted(figures[(condition, label)])
                p95 = values[int(0.95 * (len(values) - 1))]
                print(
                    f"  {label:<7} median {median(values):+.2f}  p95 {p95:+.2f}  (n={len(values)})"
                )
            plain = median(figures[(condition, "plain")])
            for label in [name for name in clients if name != "plain"]:
                value = median(figures[(condition, label)])
                if condition == "quiet" and abs(value) > 1.0:
                    missed.append(f"{label} quiet ({value:+.2f} ms, target within 1 ms)")
                if condition != "quiet" and value > plain + 0.5:
                    missed.append(
                        f"{label} under load ({value:+.2f} ms, target <= plain {plain:+.2f} + 0.5)"
                    )
    print("\nall targets met" if not missed else "\nmissed: " + "; ".join(missed))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
