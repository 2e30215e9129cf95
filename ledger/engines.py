"""What the ledger knows about each inference engine's launch parameters.

Only well-known flags are type-checked; an unknown key is kept with a warning
(engines add flags every release), and refused only when it looks like a typo
of a known one.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, cast

from django.db import models
from django.utils.translation import gettext_noop


class Engine(models.TextChoices):
    VLLM = "vllm", "vLLM"
    SGLANG = "sglang", gettext_noop("SGLang")
    LMDEPLOY = "lmdeploy", gettext_noop("LMDeploy")
    TGI = "tgi", gettext_noop("Text Generation Inference")
    OLLAMA = "ollama", gettext_noop("Ollama")
    LLAMA_CPP = "llama_cpp", "llama.cpp"
    TENSORRT_LLM = "tensorrt_llm", gettext_noop("TensorRT-LLM")
    # Any other server speaking the OpenAI API: no flag is known, so none is checked.
    OPENAI_COMPATIBLE = "openai-compatible", gettext_noop("Other OpenAI-compatible server")


@dataclass(frozen=True)
class Flag:
    kind: type | tuple[type, ...]
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()

    def problem(self, value: Any) -> str | None:
        kinds = self.kind if isinstance(self.kind, tuple) else (self.kind,)
        # bool is an int in Python; a flag that wants a number must not take true/false.
        if isinstance(value, bool) and bool not in kinds:
            return f"expected {_kind_words(kinds)}, got a boolean"
        if not isinstance(value, kinds):
            return f"expected {_kind_words(kinds)}, got {type(value).__name__}"
        # Only numeric flags have bounds; isinstance against `kinds` leaves mypy an object.
        number = cast("float", value)
        if self.minimum is not None and number < self.minimum:
            return f"must be at least {self.minimum}, got {value}"
        if self.maximum is not None and number > self.maximum:
            return f"must be at most {self.maximum}, got {value}"
        if self.choices and value not in self.choices:
            return f"must be one of {', '.join(self.choices)}; got {value!r}"
        return None


def _kind_words(kinds: tuple[type, ...]) -> str:
    words = {
        bool: "true or false",
        int: "a whole number",
        float: "a number",
        str: "a string",
        dict: "an object",
    }
    return " or ".join(words.get(kind, kind.__name__) for kind in kinds)


POSITIVE_INT = Flag(int, minimum=1)
FRACTION = Flag((int, float), minimum=0.01, maximum=1.0)
BOOL = Flag(bool)
TEXT = Flag(str)
QUANTIZATIONS = (
    "awq",
    "gptq",
    "fp8",
    "bitsandbytes",
    "gguf",
    "marlin",
    "awq_marlin",
    "gptq_marlin",
    "compressed-tensors",
    "experts_int8",
    "modelopt",
)

FLAGS: dict[str, dict[str, Flag]] = {
    Engine.VLLM: {
        "max_model_len": POSITIVE_INT,
        "tensor_parallel_size": POSITIVE_INT,
        "pipeline_parallel_size": POSITIVE_INT,
        "data_parallel_size": POSITIVE_INT,
        "gpu_memory_utilization": FRACTION,
        "max_num_seqs": POSITIVE_INT,
        "max_num_batched_tokens": POSITIVE_INT,
        "enable_prefix_caching": BOOL,
        "enable_chunked_prefill": BOOL,
        "enforce_eager": BOOL,
        "trust_remote_code": BOOL,
        "quantization": Flag(str, choices=QUANTIZATIONS),
        "dtype": Flag(str, choices=("auto", "half", "float16", "bfloat16", "float", "float32")),
        "kv_cache_dtype": Flag(str, choices=("auto", "fp8", "fp8_e5m2", "fp8_e4m3")),
        "served_model_name": TEXT,
        "tool_call_parser": TEXT,
        "enable_auto_tool_choice": BOOL,
        "guided_decoding_backend": TEXT,
        "max_lora_rank": POSITIVE_INT,
        "swap_space": Flag((int, float), minimum=0),
        # --speculative-config: {"method": "eagle" | "ngram" | …, "model", "num_speculative_tokens"}
        "speculative_config": Flag(dict),
    },
    Engine.SGLANG: {
        "context_length": POSITIVE_INT,
        "tp_size": POSITIVE_INT,
        "dp_size": POSITIVE_INT,
        "mem_fraction_static": FRACTION,
        "max_running_requests": POSITIVE_INT,
        "chunked_prefill_size": Flag(int, minimum=-1),
        "disable_radix_cache": BOOL,
        "quantization": TEXT,
        "kv_cache_dtype": TEXT,
        "served_model_name": TEXT,
        "tool_call_parser": TEXT,
        "grammar_backend": TEXT,
        "speculative_algorithm": TEXT,  # EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM, …
        "speculative_draft_model_path": TEXT,
        "speculative_num_steps": POSITIVE_INT,
        "speculative_eagle_topk": POSITIVE_INT,
        "speculative_num_draft_tokens": POSITIVE_INT,
    },
    Engine.LMDEPLOY: {
        "session_len": POSITIVE_INT,
        "tp": POSITIVE_INT,
        "cache_max_entry_count": FRACTION,
        "max_batch_size": POSITIVE_INT,
        "quant_policy": Flag(int, minimum=0, maximum=8),
        "model_format": Flag(str, choices=("hf", "awq", "gptq", "fp8")),
        "backend": Flag(str, choices=("turbomind", "pytorch")),
    },
    Engine.TGI: {
        "max_total_tokens": POSITIVE_INT,
        "max_input_tokens": POSITIVE_INT,
        "max_batch_prefill_tokens": POSITIVE_INT,
        "max_concurrent_requests": POSITIVE_INT,
        "num_shard": POSITIVE_INT,
        "quantize": TEXT,
        "dtype": Flag(str, choices=("float16", "bfloat16")),
        "speculate": POSITIVE_INT,  # --speculate: Medusa or n-gram tokens
    },
    Engine.OLLAMA: {
        "num_ctx": POSITIVE_INT,
        "num_parallel": POSITIVE_INT,
        "num_gpu": Flag(int, minimum=0),
        "keep_alive": TEXT,
    },
    Engine.LLAMA_CPP: {
        "n_ctx": POSITIVE_INT,
        "n_gpu_layers": Flag(int, minimum=-1),
        "n_parallel": POSITIVE_INT,
        "n_batch": POSITIVE_INT,
        "flash_attn": BOOL,
        "chat_format": TEXT,
        "cont_batching": BOOL,
        "draft_model": TEXT,  # llama-cpp-python's server: "prompt-lookup-decoding"
        "draft_model_num_pred_tokens": POSITIVE_INT,
    },
    Engine.TENSORRT_LLM: {
        "max_seq_len": POSITIVE_INT,
        "max_input_len": POSITIVE_INT,
        "max_batch_size": POSITIVE_INT,
        "max_num_tokens": POSITIVE_INT,
        "tp_size": POSITIVE_INT,
        "pp_size": POSITIVE_INT,
        "kv_cache_free_gpu_memory_fraction": FRACTION,
    },
}

# The flag through which each engine caps the context window it serves.
CONTEXT_FLAG: dict[str, str] = {
    Engine.VLLM: "max_model_len",
    Engine.SGLANG: "context_length",
    Engine.LMDEPLOY: "session_len",
    Engine.TGI: "max_total_tokens",
    Engine.OLLAMA: "num_ctx",
    Engine.LLAMA_CPP: "n_ctx",
    Engine.TENSORRT_LLM: "max_seq_len",
}


@dataclass
class LaunchCheck:
    errors: dict[str, str]
    warnings: list[str]


def check_launch_parameters(
    engine: str, parameters: object, *, context_limit: int | None = None
) -> LaunchCheck:
    """Check an engine's launch parameters; keys of `errors` are parameter names."""
    if not isinstance(parameters, dict):
        return LaunchCheck({"": "launch parameters must be a JSON object of flag: value"}, [])
    known = FLAGS.get(engine, {})
    errors: dict[str, str] = {}
    warnings: list[str] = []
    for key, value in parameters.items():
        flag = known.get(key)
        if flag is None:
            normalized = key.replace("-", "_").lstrip("_")
            close = difflib.get_close_matches(normalized, list(known), n=1, cutoff=0.8)
            if normalized in known:
                errors[key] = f"write it as {normalized!r} (underscores, no leading dashes)"
            elif close:
                errors[key] = f"is not a {engine} flag the ledger knows; did you mean {close[0]!r}?"
            else:
                warnings.append(
                    f"{key!r} is not a {engine} flag the ledger knows; it is kept unchecked."
                )
            continue
        problem = flag.problem(value)
        if problem:
            errors[key] = problem
    context_flag = CONTEXT_FLAG.get(engine)
    served = parameters.get(context_flag) if context_flag else None
    if (
        context_limit is not None
        and context_flag is not None
        and isinstance(served, int)
        and not isinstance(served, bool)
        and served > context_limit
    ):
        errors[context_flag] = (
            f"{served} exceeds the revision's declared context limit of {context_limit} tokens; "
            f"lower {context_flag} or raise the context limit"
        )
    return LaunchCheck(errors, warnings)
