"""Each engine's metric names, as its /metrics endpoint exposes them.

Counter families are named without `_total`, as prometheus_client's parser
names them. Where an engine renamed a metric, every name is listed, newest
first, and the first one a scrape holds is read (the summary's details say
which). Sources:

- vLLM (docs.vllm.ai, "Production Metrics"): `vllm:time_to_first_token_seconds`,
  `vllm:inter_token_latency_seconds` (which replaced the removed
  `vllm:time_per_output_token_seconds`), `vllm:e2e_request_latency_seconds`,
  `vllm:request_success_total{finished_reason=stop|length|abort}`,
  `vllm:prompt_tokens_total`, `vllm:generation_tokens_total`,
  `vllm:prefix_cache_queries_total` / `vllm:prefix_cache_hits_total` (earlier
  `vllm:gpu_prefix_cache_*`), `vllm:kv_cache_usage_perc` (earlier
  `vllm:gpu_cache_usage_perc`), and its API server's
  `http_requests_total{handler,status="2xx|4xx|5xx"}`.
- SGLang (docs.sglang.io, "Production Metrics", `--enable-metrics`):
  `sglang:time_to_first_token_seconds`, `sglang:inter_token_latency_seconds`
  (earlier `sglang:time_per_output_token_seconds`),
  `sglang:e2e_request_latency_seconds`, `sglang:num_requests_total`,
  `sglang:num_aborted_requests_total`, `sglang:prompt_tokens_total`,
  `sglang:generation_tokens_total`, `sglang:cached_tokens_total`,
  `sglang:cache_hit_rate`, `sglang:token_usage`.
- TGI (huggingface.co/docs/text-generation-inference, "Metrics"):
  `tgi_request_count`, `tgi_request_success`, `tgi_request_failure{err}`,
  `tgi_request_duration` (end to end), `tgi_request_mean_time_per_token_duration`,
  `tgi_request_input_length`, `tgi_request_generated_tokens`. No TTFT histogram.
- llama.cpp server with `--metrics` (tools/server/README.md):
  `llamacpp:prompt_tokens_total`, `llamacpp:prompt_seconds_total`,
  `llamacpp:tokens_predicted_total`, `llamacpp:tokens_predicted_seconds_total`,
  `llamacpp:n_decode_total`, `llamacpp:requests_processing`,
  `llamacpp:requests_deferred`, `llamacpp:kv_cache_usage_ratio`. Counters and
  gauges only: no request count and no latency histograms, so no percentiles;
  the mean time per output token is the decode seconds over the tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.utils.translation import gettext_noop

from ledger.engines import Engine


@dataclass(frozen=True)
class EngineMetrics:
    name: str
    label: str
    # Requests finished, split by the label saying why (stop, length, abort …).
    finished: str | None = None
    finished_label: str = "finished_reason"
    truncated_reasons: tuple[str, ...] = ("length",)
    aborted_reasons: tuple[str, ...] = ("abort",)
    # Requests counted by the engine itself (when no HTTP counter says more).
    requests: tuple[str, ...] = ()
    aborted: tuple[str, ...] = ()
    # HTTP requests by status class, on the generation endpoints.
    http_requests: str | None = None
    http_status_label: str = "status"
    http_handler_label: str = "handler"
    http_handlers: tuple[str, ...] = ()
    # Failed requests by error kind.
    failures: str | None = None
    failure_label: str = "err"
    # Latency histograms, in seconds.
    ttft: tuple[str, ...] = ()
    tpot: tuple[str, ...] = ()
    e2e: tuple[str, ...] = ()
    prompt_tokens: tuple[str, ...] = ()
    generation_tokens: tuple[str, ...] = ()
    # Token counts as histograms (TGI): their _sum is the total.
    prompt_tokens_histogram: tuple[str, ...] = ()
    generation_tokens_histogram: tuple[str, ...] = ()
    cache_hits: tuple[str, ...] = ()
    cache_queries: tuple[str, ...] = ()
    cached_tokens: tuple[str, ...] = ()  # over prompt tokens: SGLang's hit rate
    cache_hit_gauge: tuple[str, ...] = ()
    kv_cache_usage: tuple[str, ...] = ()
    # (seconds, tokens) counters whose ratio is the mean time per output token.
    decode_seconds: tuple[str, str] | None = None
    preemptions: tuple[str, ...] = ()


VLLM = EngineMetrics(
    name=Engine.VLLM.value,
    label="vLLM",
    finished="vllm:request_success",
    http_requests="http_requests",
    http_handlers=("/v1/chat/completions", "/v1/completions", "/v1/responses"),
    ttft=("vllm:time_to_first_token_seconds",),
    tpot=("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    e2e=("vllm:e2e_request_latency_seconds",),
    prompt_tokens=("vllm:prompt_tokens",),
    generation_tokens=("vllm:generation_tokens",),
    cache_hits=("vllm:prefix_cache_hits", "vllm:gpu_prefix_cache_hits"),
    cache_queries=("vllm:prefix_cache_queries", "vllm:gpu_prefix_cache_queries"),
    cache_hit_gauge=("vllm:gpu_prefix_cache_hit_rate",),
    kv_cache_usage=("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    preemptions=("vllm:num_preemptions",),
)

SGLANG = EngineMetrics(
    name=Engine.SGLANG.value,
    label=gettext_noop("SGLang"),
    requests=("sglang:num_requests",),
    aborted=("sglang:num_aborted_requests",),
    ttft=("sglang:time_to_first_token_seconds",),
    tpot=("sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds"),
    e2e=("sglang:e2e_request_latency_seconds",),
    prompt_tokens=("sglang:prompt_tokens",),
    generation_tokens=("sglang:generation_tokens",),
    cached_tokens=("sglang:cached_tokens",),
    cache_hit_gauge=("sglang:cache_hit_rate",),
    kv_cache_usage=("sglang:token_usage",),
)

TGI = EngineMetrics(
    name=Engine.TGI.value,
    label=gettext_noop("Text Generation Inference"),
    requests=("tgi_request_count",),
    failures="tgi_request_failure",
    tpot=("tgi_request_mean_time_per_token_duration",),
    e2e=("tgi_request_duration",),
    prompt_tokens_histogram=("tgi_request_input_length",),
    generation_tokens_histogram=("tgi_request_generated_tokens",),
)

LLAMACPP = EngineMetrics(
    name=Engine.LLAMA_CPP.value,
    label=gettext_noop("llama.cpp server"),
    prompt_tokens=("llamacpp:prompt_tokens",),
    generation_tokens=("llamacpp:tokens_predicted",),
    kv_cache_usage=("llamacpp:kv_cache_usage_ratio",),
    decode_seconds=("llamacpp:tokens_predicted_seconds", "llamacpp:tokens_predicted"),
)

# Keyed by the ledger's engine values (`ledger.engines.Engine`), as runtimes and
# backends record them.
ENGINES: dict[str, EngineMetrics] = {e.name: e for e in (VLLM, SGLANG, TGI, LLAMACPP)}


def engine_for(name: str) -> EngineMetrics:
    """The engine's metric names by its value; KeyError names the known ones."""
    if name not in ENGINES:
        raise KeyError(f"no metric names known for engine {name!r}; known: {', '.join(ENGINES)}")
    return ENGINES[name]
