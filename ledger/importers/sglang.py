"""SGLang `python -m sglang.bench_serving` output.

JSON Lines, one line per run (each run is a level). Keys are like vLLM's but
the end-to-end metric is `e2e_latency` (`mean_e2e_latency_ms`, ...), there are
no p50 keys (`median_*` stands for it) and no max. `request_rate` is written
as a bare `Infinity`, which strict JSON parsers refuse; it is read as an
unlimited rate.

With `--output-details` the file has per-request `ttfts` and `itls` (a list
of gaps per request), in seconds: TTFT and ITL are recomputed from them over
the successful requests, as the other importers do, in seconds and then
scaled to ms as SGLang does, so they equal its numbers to the last bit (and
gain a max, which SGLang does not write; a run where no request succeeded has
no TTFT, where SGLang writes 0). There is no end-to-end latency per
request (TTFT plus the gaps falls short of it by the final chunk), so TPOT and
e2e stay the tool's, and so does the level's source. The TTFTs are kept as
per-request data (for a CDF); `output_lens` is the requested length, not what
was generated, so it is not used. The file does not say which SGLang version
wrote it.
"""

from __future__ import annotations

import numpy as np

from .fields import Node, check_latencies, float_array, run_records
from .report import Level, ParsedReport, RequestArrays, Throughput
from .source import Probe
from .stats import latency_stats, level_name, token_stats
from .vllm import chunk_gaps, conditions, summary_stats

NAME = "sglang"
EXPECTED = (
    "`sglang.bench_serving` JSON Lines, one object per run "
    "(keys such as completed, duration, mean_e2e_latency_ms, mean_ttft_ms)"
)

_METRICS = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2e": "e2e_latency"}
_META_KEYS = (
    "backend",
    "dataset_name",
    "tag",
    "random_input_len",
    "random_output_len",
    "random_range_ratio",
    "sharegpt_output_len",
)


def detect(probe: Probe) -> str | None:
    record = probe.record()
    if record is not None and {"mean_e2e_latency_ms", "completed"} <= record.keys():
        return "bench-serving-jsonl"
    return None


def parse(probe: Probe, variant: str) -> ParsedReport:
    levels: list[Level] = []
    meta: dict[str, str | int | float | bool | None] = {}
    for run in run_records(probe):
        if not levels:
            meta = {k: run.raw(k) for k in _META_KEYS if isinstance(run.raw(k), str | int | float)}
        levels.append(_level(run))
    return ParsedReport(
        filename=probe.source.filename,
        tool="sglang",
        format=NAME,
        variant=variant,
        source="tool",
        levels=levels,
        meta=meta,
    )


def _level(run: Node) -> Level:
    cond = conditions(run)
    completed = run.count("completed", required=True)
    failed = None
    errors = run.raw("errors")
    if isinstance(errors, list):
        failed = sum(1 for e in errors if e)
    cond.count(completed, failed)
    if completed:
        inputs, outputs = run.num("total_input_tokens"), run.num("total_output_tokens")
        cond.prompt_tokens.mean = None if inputs is None else inputs / completed
        cond.output_tokens.mean = None if outputs is None else outputs / completed
    level = Level(
        name=run.text("tag") or level_name(cond),
        source="tool",
        conditions=cond,
        throughput=Throughput(
            requests_per_s=run.num("request_throughput"),
            output_tokens_per_s=run.num("output_throughput"),
            total_tokens_per_s=run.num("total_throughput"),
        ),
    )
    # All four are read, and checked, even where TTFT and ITL are recomputed below.
    for attr, key in _METRICS.items():
        setattr(level, attr, summary_stats(run, key))

    ttft = float_array(run, "ttfts")
    if ttft is not None and len(ttft):
        if isinstance(errors, list) and len(errors) == len(ttft):
            failed_mask = np.array([bool(e) for e in errors], dtype=bool)
        else:
            failed_mask = np.zeros(len(ttft), dtype=bool)
        check_latencies(ttft, ~failed_mask, run, "ttfts")
        ttft[failed_mask] = np.nan
        level.ttft = latency_stats(ttft, 1000.0)
        if run.has("itls"):
            gaps, _ = chunk_gaps(run, ~failed_mask)
            level.itl = latency_stats(gaps, 1000.0)
        level.requests = RequestArrays(error=failed_mask, ttft_ms=ttft * 1000.0)
        inputs_arr = float_array(run, "input_lens", len(ttft))
        if inputs_arr is not None:
            mean = cond.prompt_tokens.mean
            cond.prompt_tokens = token_stats(inputs_arr[~failed_mask])
            cond.prompt_tokens.mean = mean if mean is not None else cond.prompt_tokens.mean
    return level
