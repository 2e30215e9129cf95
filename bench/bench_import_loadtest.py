"""How fast, and in how much memory, per-request load-test files are parsed.

Generates 100,000-request files in a temporary folder (generic JSON Lines and
CSV, and AIPerf `profile_export.jsonl` records built from a real record of the
sample run), then parses each in a fresh interpreter and prints the wall time,
the peak of Python allocations (tracemalloc, numpy included) and the growth of
the process's peak resident set. The target: under 5 s, memory bounded (no
Python object kept per request).

    .venv/bin/python bench/bench_import_loadtest.py [--requests N]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# One real profiling record of `aiperf profile ... --export-level records`.
AIPERF_TEMPLATE = {
    "metadata": {
        "session_num": 2,
        "x_request_id": "ff984e64-3629-4e41-96cb-52441aaf28a4",
        "x_correlation_id": "c31c3f6d-01f7-4901-ae9f-7e7043510f66",
        "conversation_id": "session_000002",
        "turn_index": 0,
        "credit_issued_ns": 1795937760101870783,
        "request_start_ns": 1795937760102871568,
        "request_ack_ns": 1795937760110135968,
        "request_end_ns": 1795937761914288631,
        "worker_id": "worker_45334c83",
        "record_processor_id": "record_processor_1a4f9475",
        "benchmark_phase": "profiling",
        "phase_index": 1,
        "profiling_index": 0,
        "phase_name": "profiling",
        "phase_kind": "profiling",
        "was_cancelled": False,
        "context_overflow_skip": False,
        "agent_depth": 0,
        "root_correlation_id": "c31c3f6d-01f7-4901-ae9f-7e7043510f66",
    },
    "metrics": {
        "http_req_receiving": {"value": 1195.118828, "unit": "ms"},
        "output_sequence_length": {"value": 32, "unit": "tokens"},
        "input_sequence_length": {"value": 63, "unit": "tokens"},
        "time_to_first_token": {"value": 617.037433, "unit": "ms"},
        "request_latency": {"value": 1809.270758, "unit": "ms"},
        "http_req_connection_reused": {"value": 1, "unit": "ratio"},
        "http_req_duration": {"value": 1811.2921979999999, "unit": "ms"},
        "output_token_count": {"value": 32, "unit": "tokens"},
        "inter_chunk_latency": {"value": [], "unit": "ms"},
        "time_to_second_token": {"value": 46.128299999999996, "unit": "ms"},
        "http_req_chunks_received": {"value": 35, "unit": "count"},
        "http_req_blocked": {"value": 0.0, "unit": "ms"},
        "http_req_chunks_sent": {"value": 1, "unit": "count"},
        "http_req_connecting": {"value": 0.0, "unit": "ms"},
        "http_req_waiting": {"value": 615.555764, "unit": "ms"},
        "http_req_sending": {"value": 0.617606, "unit": "ms"},
        "http_req_dns_lookup": {"value": 0.0, "unit": "ms"},
        "http_req_data_received": {"value": 8.1162109375, "unit": "KB"},
        "time_to_first_output_token": {"value": 617.037433, "unit": "ms"},
        "http_req_data_sent": {"value": 0.4306640625, "unit": "KB"},
        "osl_mismatch_diff_pct": {"value": 0.0, "unit": "%"},
        "prefill_throughput_per_user": {"value": 102.10077481636353, "unit": "tokens/sec/user"},
        "decode_duration": {"value": 1192.233325, "unit": "ms"},
        "inter_token_latency": {"value": 38.45913951612903, "unit": "ms"},
        "e2e_output_token_throughput": {"value": 17.686683907594553, "unit": "tokens/sec/user"},
        "http_req_total": {"value": 1811.2921979999999, "unit": "ms"},
        "http_req_connection_overhead": {"value": 0.0, "unit": "ms"},
        "output_token_throughput_per_user": {
            "value": 26.001621788251892,
            "unit": "tokens/sec/user",
        },
    },
}


def write_generic_jsonl(path: Path, n: int, rng: random.Random) -> None:
    with path.open("wb") as out:
        for i in range(n):
            failed = rng.random() < 0.01
            ttft = rng.lognormvariate(5.5, 0.4)
            tokens = rng.randint(16, 512)
            row = {
                "ttft_ms": None if failed else round(ttft, 3),
                "e2e_ms": None if failed else round(ttft + tokens * rng.uniform(15, 40), 3),
                "input_tokens": rng.randint(64, 4096),
                "output_tokens": 0 if failed else tokens,
                "error": "HTTP 503" if failed else None,
                "start_s": round(i * 0.01, 3),
            }
            out.write(orjson.dumps(row) + b"\n")


def write_generic_csv(path: Path, n: int, rng: random.Random) -> None:
    with path.open("w", encoding="utf-8") as out:
        out.write("ttft_ms,e2e_ms,input_tokens,output_tokens,error,start_s\n")
        for i in range(n):
            failed = rng.random() < 0.01
            ttft = rng.lognormvariate(5.5, 0.4)
            tokens = rng.randint(16, 512)
            if failed:
                out.write(f",,{rng.randint(64, 4096)},0,HTTP 503,{i * 0.01:.3f}\n")
            else:
                e2e = ttft + tokens * rng.uniform(15, 40)
                out.write(
                    f"{ttft:.3f},{e2e:.3f},{rng.randint(64, 4096)},{tokens},,{i * 0.01:.3f}\n"
                )


def write_aiperf_records(path: Path, n: int, rng: random.Random, warmup: int = 100) -> None:
    record = json.loads(json.dumps(AIPERF_TEMPLATE))
    meta, metrics = record["metadata"], record["metrics"]
    start = meta["request_start_ns"]
    with path.open("wb") as out:
        for i in range(warmup + n):
            meta["benchmark_phase"] = "warmup" if i < warmup else "profiling"
            ttft = rng.lognormvariate(6.0, 0.4)
            gaps = [round(rng.uniform(15, 45), 6) for _ in range(31)]
            e2e = ttft + sum(gaps)
            meta["request_start_ns"] = start + i * 10_000_000
            meta["request_end_ns"] = meta["request_start_ns"] + int(e2e * 1e6)
            metrics["time_to_first_token"]["value"] = ttft
            metrics["request_latency"]["value"] = e2e
            metrics["inter_chunk_latency"]["value"] = gaps
            metrics["inter_token_latency"]["value"] = sum(gaps) / 31
            out.write(orjson.dumps(record) + b"\n")


def child(fmt: str, path: str) -> None:
    """Parse once for time and RSS, once more under tracemalloc; print JSON."""
    from ledger.importers import parse_report

    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    report = parse_report(path, filename=Path(path).name, format=fmt)
    wall = time.perf_counter() - started
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    level = report.levels[0]
    del report
    tracemalloc.start()
    parse_report(path, filename=Path(path).name, format=fmt)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(
        json.dumps(
            {
                "wall_s": wall,
                "rss_growth_mb": (rss_after - rss_before) / 1024,  # ru_maxrss is KiB on Linux
                "tracemalloc_peak_mb": peak / 2**20,
                "requests": level.conditions.requests,
                "p99_ttft_ms": level.ttft.p99,
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--child", nargs=2, metavar=("FORMAT", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return

    rng = random.Random(42)
    n = args.requests
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        cases = [
            ("generic JSONL", "generic", folder / "requests.jsonl", write_generic_jsonl),
            ("generic CSV", "generic", folder / "requests.csv", write_generic_csv),
            ("AIPerf records", "aiperf", folder / "profile_export.jsonl", write_aiperf_records),
        ]
        print(f"{n:,} requests per file")
        print(
            f"{'file':<16} {'size MB':>8} {'wall s':>7} {'py peak MB':>10} {'RSS +MB':>8}  requests"
        )
        for label, fmt, path, write in cases:
            write(path, n, rng)
            result = subprocess.run(
                [sys.executable, __file__, "--child", fmt, str(path)],
                capture_output=True,
                text=True,
                check=True,
            )
            figures = json.loads(result.stdout)
            size = path.stat().st_size / 2**20
            print(
                f"{label:<16} {size:>8.1f} {figures['wall_s']:>7.2f} "
                f"{figures['tracemalloc_peak_mb']:>10.1f} {figures['rss_growth_mb']:>8.1f}  "
                f"{figures['requests']:,}"
            )


if __name__ == "__main__":
    main()
