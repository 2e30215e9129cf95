"""Whether an engine's /metrics shows what its revision declares (the `metrics`
capability: the engine's series names), and which of the seven metrics a release
declares (`releases.schemas.METRICS`, the seed's §6.5) that scrape backs.

A declared counter may be named with or without `_total` (the exposition's sample name,
or the family name prometheus_client's parser gives it). GPU memory is DCGM's
(`DCGM_FI_DEV_FB_USED`), not an engine's: it is backed only when the scraped endpoint
carries it too.
"""

from __future__ import annotations

from typing import Any

from ledger.metrics_import import ENGINES, ExpositionError, parse_exposition

# The seven, in the order releases list them.
COVERAGE_KEYS = (
    "ttft",
    "tpot",
    "tokens_per_s",
    "queue_length",
    "gpu_memory",
    "kv_cache_usage",
    "error_rate",
)
# Requests waiting for a slot: vLLM's scheduler, SGLang's queue, TGI's queue, llama.cpp's
# deferred requests.
QUEUE_LENGTH: dict[str, tuple[str, ...]] = {
    "vllm": ("vllm:num_requests_waiting",),
    "sglang": ("sglang:num_queue_reqs",),
    "tgi": ("tgi_queue_size",),
    "llama_cpp": ("llamacpp:requests_deferred",),
}
GPU_MEMORY = ("DCGM_FI_DEV_FB_USED",)


def coverage_names(engine: str) -> dict[str, tuple[str, ...]]:
    """The series that back each of the seven on `engine` (empty for an unknown engine)."""
    known = ENGINES.get(engine)
    if known is None:
        return {key: GPU_MEMORY if key == "gpu_memory" else () for key in COVERAGE_KEYS}
    errors = tuple(n for n in (known.http_requests, known.failures, known.finished) if n)
    return {
        "ttft": known.ttft,
        "tpot": known.tpot + (known.decode_seconds or ()),
        "tokens_per_s": known.generation_tokens + known.generation_tokens_histogram,
        "queue_length": QUEUE_LENGTH.get(engine, ()),
        "gpu_memory": GPU_MEMORY,
        "kv_cache_usage": known.kv_cache_usage,
        "error_rate": errors + known.aborted,
    }


def judge_metrics(
    declared: Any, text: str, *, engine: str, source: str
) -> tuple[bool, dict[str, Any]]:
    """Passed when every declared series is in the scrape; the evidence lists what was
    found and missing, and which of the seven the scrape backs (`covers`)."""
    evidence: dict[str, Any] = {"probe": f"GET /metrics ({source})"}
    names = [str(n) for n in declared] if isinstance(declared, list) else []
    if not names:
        evidence["error_detail"] = "the metrics capability names no series to look for"
        return False, evidence
    try:
        scrape = parse_exposition(text, source=source)
    except ExpositionError as error:
        evidence["error_detail"] = str(error)
        return False, evidence
    present = scrape.families()
    found = [n for n in names if n in present or n.removesuffix("_total") in present]
    evidence["found"] = found
    evidence["missing"] = [n for n in names if n not in found]
    evidence["covers"] = [
        key
        for key, series in coverage_names(engine).items()
        if any(s in present or s.removesuffix("_total") in present for s in series)
    ]
    return not evidence["missing"], evidence
