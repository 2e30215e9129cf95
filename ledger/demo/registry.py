"""The demo registry, as a registry document.

`demo_document()` is what `seed_demo` applies (through `apply_document`, so
through the domain verbs): five services across tiers and exposures, assets
with lineage and quantized variants, runtimes for five engines, revisions and
capabilities. On the first run `history_documents()` are applied before it so
that earlier revisions have really served (and are locked), as they would in
a registry with a past.
"""

from __future__ import annotations

import copy
import datetime as dt
import hashlib
from typing import Any


def digest(seed: str) -> str:
    """A stable, well-formed sha256 digest standing in for a real artifact's."""
    return "sha256:" + hashlib.sha256(seed.encode()).hexdigest()


def image_reference(repository: str, tag: str) -> str:
    return f"{repository}:{tag}@{digest(f'image:{repository}:{tag}')}"


def asset_fields(
    name: str,
    revision: str,
    *,
    team: str,
    family: str,
    source: str,
    license: str,
    tokenizer: str | None = None,
    chat_template: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    # Derived assets usually keep their base's tokenizer (a repository id); a chat
    # template can change silently in a derived repository.
    tokenizer = tokenizer or source
    return {
        "name": name,
        "revision": revision,
        "team": team,
        "family": family,
        "source_repository": source,
        "license": license,
        "license_approval": "approved",
        "weights_digest": digest(f"weights:{name}@{revision}"),
        "tokenizer_id": tokenizer,
        "tokenizer_digest": digest(f"tokenizer:{tokenizer}"),
        "chat_template_digest": digest(f"chat-template:{chat_template or tokenizer}"),
        "generation_config_digest": digest(f"generation-config:{name}@{revision}"),
        "config_digest": digest(f"config:{name}@{revision}"),
        **extra,
    }


_VLLM_METRICS = [
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:gpu_cache_usage_perc",
    "vllm:time_to_first_token_seconds",
]
_ERROR_CODES = {
    "429": "queue full at the gateway; retry after the Retry-After header",
    "503": "engine restarting; the gateway fails over",
}


def demo_document() -> dict[str, Any]:
    """The demo registry, in the format `manage.py apply` reads."""
    qwen25 = "Qwen/Qwen2.5-7B-Instruct"
    return {
        "version": 1,
        "teams": [
            # owner2, a second model owner, signs for the model teams what owner files;
            # admin (a superuser) is in them too: an administrator outside a team does not
            # sign for it, and one inside signs as an administrator, not as a model owner.
            {"slug": "data-agents", "name": "Data agents", "members": ["owner", "owner2", "admin"]},
            {
                "slug": "developer-productivity",
                "name": "Developer productivity",
                "members": ["owner", "owner2", "admin"],
            },
            {"slug": "inference-platform", "name": "Inference platform", "members": ["sre"]},
            {
                "slug": "knowledge-platform",
                "name": "Knowledge platform",
                "members": ["owner", "owner2", "admin"],
            },
            {
                "slug": "localization",
                "name": "Localization",
                "members": ["owner", "owner2", "admin"],
            },
            {"slug": "support-ai", "name": "Support AI", "members": ["owner", "owner2", "admin"]},
        ],
        "licenses": [
            {
                "spdx_id": "Apache-2.0",
                "name": "Apache License 2.0",
                "kind": "permissive",
                "terms_url": "https://www.apache.org/licenses/LICENSE-2.0",
            },
            {
                "spdx_id": "CC-BY-NC-4.0",
                "name": "Creative Commons Attribution Non Commercial 4.0 International",
                "kind": "non_commercial",
                "terms_url": "https://creativecommons.org/licenses/by-nc/4.0/legalcode",
            },
            {
                "spdx_id": "LicenseRef-Gemma",
                "name": "Gemma Terms of Use",
                "kind": "acceptable_use",
                "gated": True,
                "terms_url": "https://ai.google.dev/gemma/terms",
            },
            {
                "spdx_id": "LicenseRef-Llama-3.1-Community",
                "name": "Llama 3.1 Community License Agreement",
                "kind": "acceptable_use",
                "gated": True,
                "terms_url": "https://www.llama.com/llama3_1/license/",
            },
            {
                "spdx_id": "MIT",
                "name": "MIT License",
                "kind": "permissive",
                "terms_url": "https://opensource.org/license/mit",
            },
        ],
        "model_assets": [
            asset_fields(
                "Qwen2-7B-Instruct",
                "f2826a0",
                team="knowledge-platform",
                family="qwen2",
                source="Qwen/Qwen2-7B-Instruct",
                license="Apache-2.0",
                quantization="bf16",
                model_card_url="https://huggingface.co/Qwen/Qwen2-7B-Instruct",
                lifecycle="retired",
                deprecated_on=dt.date(2025, 10, 31),
                retired_on=dt.date(2026, 1, 31),
            ),
            asset_fields(
                "Qwen2.5-7B-Instruct",
                "a09a354",
                team="knowledge-platform",
                family="qwen2.5",
                source=qwen25,
                license="Apache-2.0",
                quantization="bf16",
                model_card_url="https://huggingface.co/Qwen/Qwen2.5-7B-Instruct",
            ),
            asset_fields(
                "kb-qwen2.5-7b-ft",
                "v3",
                team="knowledge-platform",
                family="qwen2.5",
                source="models.internal.example.com/knowledge-platform/kb-qwen2.5-7b-ft",
                license="Apache-2.0",
                tokenizer=qwen25,
                chat_template="kb-qwen2.5-7b-ft",
                quantization="bf16",
                derived_from="Qwen2.5-7B-Instruct@a09a354",
                derivation="fine_tuned",
            ),
            asset_fields(
                "kb-qwen2.5-7b-ft-awq",
                "v3-awq",
                team="knowledge-platform",
                family="qwen2.5",
                source="models.internal.example.com/knowledge-platform/kb-qwen2.5-7b-ft-awq",
                license="Apache-2.0",
                tokenizer=qwen25,
                chat_template="kb-qwen2.5-7b-ft",
                quantization="int4-awq",
                derived_from="kb-qwen2.5-7b-ft@v3",
                derivation="quantized",
            ),
            asset_fields(
                "Qwen2.5-Coder-32B-Instruct",
                "b4724ac",
                team="data-agents",
                family="qwen2.5-coder",
                source="Qwen/Qwen2.5-Coder-32B-Instruct",
                license="Apache-2.0",
                quantization="bf16",
            ),
            asset_fields(
                "Qwen2.5-Coder-32B-Instruct-AWQ",
                "8e0c0ae",
                team="data-agents",
                family="qwen2.5-coder",
                source="Qwen/Qwen2.5-Coder-32B-Instruct-AWQ",
                license="Apache-2.0",
                tokenizer="Qwen/Qwen2.5-Coder-32B-Instruct",
                quantization="int4-awq",
                derived_from="Qwen2.5-Coder-32B-Instruct@b4724ac",
                derivation="quantized",
            ),
            asset_fields(
                "Mistral-7B-Instruct-v0.3",
                "e0bc86c",
                team="support-ai",
                family="mistral",
                source="mistralai/Mistral-7B-Instruct-v0.3",
                license="Apache-2.0",
                quantization="bf16",
                lifecycle="deprecated",
                deprecated_on=dt.date(2026, 2, 15),
            ),
            asset_fields(
                "Phi-3.5-mini-instruct",
                "af0dfb8",
                team="support-ai",
                family="phi-3.5",
                source="microsoft/Phi-3.5-mini-instruct",
                license="MIT",
                quantization="bf16",
            ),
            asset_fields(
                "Qwen2.5-Coder-7B-Instruct",
                "0eb6b11",
                team="developer-productivity",
                family="qwen2.5-coder",
                source="Qwen/Qwen2.5-Coder-7B-Instruct",
                license="Apache-2.0",
                quantization="bf16",
            ),
            asset_fields(
                "Qwen2.5-Coder-7B-Instruct-GGUF",
                "q4_k_m",
                team="developer-productivity",
                family="qwen2.5-coder",
                source="Qwen/Qwen2.5-Coder-7B-Instruct-GGUF",
                license="Apache-2.0",
                tokenizer="Qwen/Qwen2.5-Coder-7B-Instruct",
                quantization="gguf-q4_k_m",
                derived_from="Qwen2.5-Coder-7B-Instruct@0eb6b11",
                derivation="quantized",
            ),
            asset_fields(
                "Llama-3.1-8B-Instruct",
                "0e9e39f",
                team="localization",
                family="llama-3.1",
                source="meta-llama/Llama-3.1-8B-Instruct",
                license="LicenseRef-Llama-3.1-Community",
                quantization="bf16",
                model_card_url="https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct",
                license_acceptances=[
                    {
                        "terms_version": "Llama 3.1 Community License, 2024-07-23",
                        "accepted_by": "Sofia Compliance",
                        "accepted_at": dt.datetime(2026, 1, 12, 10, 30, tzinfo=dt.UTC),
                        "note": "Accepted on the model hub gate for the company account.",
                    }
                ],
            ),
            asset_fields(
                "gemma-2-9b-it",
                "11c9b30",
                team="localization",
                family="gemma-2",
                source="google/gemma-2-9b-it",
                license="LicenseRef-Gemma",
                quantization="bf16",
                license_approval="pending",
            ),
            asset_fields(
                "aya-expanse-8b",
                "b984857",
                team="localization",
                family="aya-expanse",
                source="CohereForAI/aya-expanse-8b",
                license="CC-BY-NC-4.0",
                quantization="fp16",
                license_approval="pending",
            ),
        ],
        "runtimes": _demo_runtimes(),
        "services": [_with_gateway_policies(service) for service in _demo_services()],
    }


def _runtime(name: str, engine: str, version: str, image: str, params: dict, gpu: tuple, **extra):
    model, count, memory = gpu
    return {
        "name": name,
        "team": extra.pop("team", "inference-platform"),
        "engine": engine,
        "engine_version": version,
        "image": image,
        "launch_parameters": params,
        "gpu_model": model,
        "gpu_count": count,
        "gpu_memory_gb": memory,
        **extra,
    }


def _demo_runtimes() -> list[dict[str, Any]]:
    vllm = "registry.example.com/inference/vllm-openai"
    h100, l4, a100 = ("H100-80GB", 1, 80), ("L4-24GB", 1, 24), ("A100-80GB", 1, 80)
    return [
        _runtime(
            "vllm-0-5-4-l40s",
            "vllm",
            "0.5.4",
            image_reference(vllm, "v0.5.4"),
            {"max_model_len": 16384, "tensor_parallel_size": 1, "gpu_memory_utilization": 0.9},
            ("L40S-48GB", 1, 48),
        ),
        _runtime(
            "vllm-0-6-3-h100",
            "vllm",
            "0.6.3",
            image_reference(vllm, "v0.6.3"),
            {
                "max_model_len": 32768,
                "tensor_parallel_size": 1,
                "gpu_memory_utilization": 0.9,
                "enable_prefix_caching": True,
                "max_num_seqs": 128,
            },
            h100,
        ),
        _runtime(
            "vllm-0-6-3-h100-awq",
            "vllm",
            "0.6.3",
            image_reference(vllm, "v0.6.3"),
            {
                "max_model_len": 32768,
                "quantization": "awq_marlin",
                "gpu_memory_utilization": 0.92,
                "enable_prefix_caching": True,
                "max_num_seqs": 256,
            },
            h100,
        ),
        _runtime(
            "vllm-0-7-3-h100-awq",
            "vllm",
            "0.7.3",
            image_reference(vllm, "v0.7.3"),
            {
                "max_model_len": 32768,
                "quantization": "awq_marlin",
                "gpu_memory_utilization": 0.92,
                "enable_prefix_caching": True,
                "enable_chunked_prefill": True,
                "max_num_seqs": 256,
            },
            h100,
        ),
        _runtime(
            "vllm-0-6-3-a100-16k",
            "vllm",
            "0.6.3",
            image_reference(vllm, "v0.6.3"),
            {"max_model_len": 16384, "gpu_memory_utilization": 0.9, "enable_prefix_caching": True},
            a100,
        ),
        _runtime(
            "vllm-0-6-3-a100-8k",
            "vllm",
            "0.6.3",
            image_reference(vllm, "v0.6.3"),
            {"max_model_len": 8192, "gpu_memory_utilization": 0.9, "max_num_seqs": 64},
            a100,
        ),
        _runtime(
            "sglang-0-3-5-h100x2",
            "sglang",
            "0.3.5",
            image_reference("docker.io/lmsysorg/sglang", "v0.3.5-cu124"),
            {
                "context_length": 32768,
                "tp_size": 2,
                "mem_fraction_static": 0.85,
                "max_running_requests": 64,
                "grammar_backend": "outlines",
            },
            ("H100-80GB", 2, 80),
        ),
        _runtime(
            "sglang-0-4-1-h100-awq",
            "sglang",
            "0.4.1",
            image_reference("docker.io/lmsysorg/sglang", "v0.4.1.post3-cu124"),
            {
                "context_length": 32768,
                "tp_size": 1,
                "quantization": "awq_marlin",
                "mem_fraction_static": 0.88,
                "max_running_requests": 96,
                "grammar_backend": "xgrammar",
            },
            h100,
        ),
        _runtime(
            "tgi-2-4-0-l4",
            "tgi",
            "2.4.0",
            image_reference("ghcr.io/huggingface/text-generation-inference", "2.4.0"),
            {
                "max_input_tokens": 7168,
                "max_total_tokens": 8192,
                "max_batch_prefill_tokens": 8192,
                "max_concurrent_requests": 128,
                "dtype": "bfloat16",
            },
            l4,
        ),
        _runtime(
            "tgi-3-0-1-l4",
            "tgi",
            "3.0.1",
            image_reference("ghcr.io/huggingface/text-generation-inference", "3.0.1"),
            {"max_input_tokens": 15360, "max_total_tokens": 16384, "max_concurrent_requests": 128},
            l4,
        ),
        # An experimental pilot: the tag is not pinned yet (allowed off production, with a warning).
        _runtime(
            "ollama-0-3-14-workstation",
            "ollama",
            "0.3.14",
            "docker.io/ollama/ollama:0.3.14",
            {"num_ctx": 8192, "num_parallel": 4, "keep_alive": "30m"},
            ("RTX-4090-24GB", 1, 24),
            team="developer-productivity",
        ),
        _runtime(
            "llama-cpp-b4179-l4",
            "llama_cpp",
            "b4179",
            image_reference("ghcr.io/ggerganov/llama.cpp", "server-cuda-b4179"),
            {
                "n_ctx": 16384,
                "n_gpu_layers": -1,
                "n_parallel": 4,
                "flash_attn": True,
                "cont_batching": True,
            },
            l4,
            team="developer-productivity",
        ),
    ]


def _capabilities(context: int, concurrency: int, **extra: Any) -> dict[str, Any]:
    return {
        "context_length": context,
        "max_concurrency": concurrency,
        "streaming": "sse",
        "rollback_method": "traffic_shift",
        **extra,
    }


def _revision(number: int, asset: str, runtime: str, context: int, gateway: str, **extra):
    return {
        "number": number,
        "model_asset": asset,
        "runtime": runtime,
        "context_limit": context,
        "gateway_policy_version": gateway,
        **extra,
    }


# Task types that must never degrade silently (releases' playbooks): they stop or go to
# a person; the others go to the async queue or stop with a message.
_NEVER_DEGRADE = {"sql", "tool-use", "finance", "contracts"}
_QUEUED = {"summarization", "translation", "code-review"}
# Policy names used beyond the revisions of the file (a release of the demo names them).
_MORE_POLICIES = {"support-summarizer": ["gw-2026.02"]}


def demo_policy(
    slug: str, tenants: list[str], task_types: list[str], *, tier: str, label: str = ""
) -> dict[str, Any]:
    """A gateway policy document the service's tier accepts: every limit, each tenant's
    quota, a degradation per task type, egress stated. Later versions differ a little
    from earlier ones, as real ones do."""
    newer = label >= "gw-2026.02"
    production = tier == "production"
    degradation: dict[str, Any] = {}
    for task in task_types:
        if task in _NEVER_DEGRADE:
            degradation[task] = (
                {"action": "human_review"}
                if task == "tool-use"
                else {
                    "action": "stop",
                    "message": "The data assistant is busy; nothing was run. "
                    "Try again in a few minutes.",
                }
            )
        elif task in _QUEUED:
            degradation[task] = {"action": "async_queue"}
        else:
            degradation[task] = {
                "action": "stop",
                "message": f"{slug} is busy; please try again in a minute.",
            }
    return {
        "limits": {
            "max_input_tokens": 16384 if production else 8192,
            # kb-assistant's 2026.02 policy cuts answers shorter: its diff shows it.
            "max_output_tokens": 1024 if (newer and slug == "kb-assistant") else 2048,
            "timeout_s": 60,
            "stream_timeout_s": 30,
            "max_parallel_requests": 96 if newer else 64,
        },
        "tenants": [
            {
                "name": tenant,
                "rpm": 600 if index == 0 else 300,
                "tpm": 200000 if index == 0 else 100000,
                "max_parallel_requests": 16,
                **(
                    {"budget": {"amount": 500, "currency": "USD", "period_days": 30}}
                    if production
                    else {}
                ),
            }
            for index, tenant in enumerate(tenants)
        ],
        "degradation": degradation,
        "retries": {"num_retries": 2, "allowed_fails": 3, "cooldown_s": 30},
        "egress": {"external_fallback_allowed": False},
    }


def _policy_names(service: dict[str, Any]) -> list[str]:
    """The names of the service's policies in the order they came, each once."""
    names: list[str] = []
    for name in [r["gateway_policy_version"] for r in service["revisions"]] + _MORE_POLICIES.get(
        service["slug"], []
    ):
        if name not in names:
            names.append(name)
    return names


def policy_label(slug: str, name: str) -> str:
    """The version label (`v3`) of the demo policy called `name` (`gw-2026.02`)."""
    service = next(s for s in _demo_services() if s["slug"] == slug)
    return f"v{_policy_names(service).index(name) + 1}"


def _with_gateway_policies(service: dict[str, Any]) -> dict[str, Any]:
    """The service with a policy version per policy its revisions name, in order; each
    revision then names its version (`v2`), the name (`gw-2026.01`) kept in the note."""
    names = _policy_names(service)
    service["gateway_policies"] = [
        {
            "version": number,
            "note": f"Policy {name.removeprefix('gw-')}.",
            "document": demo_policy(
                service["slug"],
                service["tenants"],
                service["task_types"],
                tier=service["tier"],
                label=name,
            ),
        }
        for number, name in enumerate(names, start=1)
    ]
    for revision in service["revisions"]:
        revision["gateway_policy_version"] = (
            f"v{names.index(revision['gateway_policy_version']) + 1}"
        )
    return service


def _demo_services() -> list[dict[str, Any]]:
    kb_caps = {"task_types": ["chat", "rag"], "metrics": _VLLM_METRICS, "error_codes": _ERROR_CODES}
    return [
        {
            "slug": "code-review-bot",
            "name": "Code review bot",
            "description": "Comments on merge requests; an experiment of developer productivity.",
            "team": "developer-productivity",
            "tier": "experimental",
            "exposure": "internal",
            "task_types": ["code-review"],
            "tenants": ["platform-engineering"],
            "review_cadence_days": 30,
            "live_revision": 1,
            "revisions": [
                _revision(
                    1,
                    "Qwen2.5-Coder-7B-Instruct-GGUF@q4_k_m",
                    "ollama-0-3-14-workstation",
                    8192,
                    "gw-2026.01",
                    notes="Pilot on a workstation GPU; the image is not pinned yet.",
                    capabilities=_capabilities(8192, 4, rollback_method="redeploy_previous"),
                ),
                _revision(
                    2,
                    "Qwen2.5-Coder-7B-Instruct-GGUF@q4_k_m",
                    "llama-cpp-b4179-l4",
                    16384,
                    "gw-2026.02",
                    based_on=1,
                    notes="Candidate: llama.cpp server on an L4, image pinned by digest.",
                    capabilities=_capabilities(
                        16384, 4, rollback_method="redeploy_previous", structured_output=["grammar"]
                    ),
                ),
            ],
        },
        {
            "slug": "dataagent-sql",
            "name": "Data agent: SQL",
            "description": "Writes and explains SQL over the analytics warehouse for business agents.",
            "team": "data-agents",
            "tier": "production",
            "exposure": "customer_data",
            "task_types": ["sql", "tool-use"],
            "tenants": ["finance-analytics", "ops-analytics"],
            "slos": {"ttft_p95_ms": 1200, "ttft_p99_ms": 2500, "tpot_ms": 60, "error_rate_pct": 1},
            "review_cadence_days": 60,
            "live_revision": 1,
            "revisions": [
                _revision(
                    1,
                    "Qwen2.5-Coder-32B-Instruct@b4724ac",
                    "sglang-0-3-5-h100x2",
                    32768,
                    "gw-2026.01",
                    capabilities=_capabilities(
                        32768,
                        64,
                        structured_output=["json_schema", "regex", "grammar"],
                        tool_calling=True,
                        task_types=["sql", "tool-use"],
                    ),
                ),
                _revision(
                    2,
                    "Qwen2.5-Coder-32B-Instruct-AWQ@8e0c0ae",
                    "sglang-0-4-1-h100-awq",
                    32768,
                    "gw-2026.02",
                    based_on=1,
                    notes="Candidate: INT4 AWQ on one H100 instead of two; replay the SQL set first.",
                    capabilities=_capabilities(
                        32768,
                        96,
                        structured_output=["json_schema", "regex", "grammar"],
                        tool_calling=True,
                    ),
                ),
            ],
        },
        {
            "slug": "doc-translate",
            "name": "Documentation translation",
            "description": "Translates product documentation and release notes for customers.",
            "team": "localization",
            "tier": "internal",
            "exposure": "external",
            "task_types": ["translation"],
            "tenants": ["docs", "marketing"],
            "slos": {"ttft_p95_ms": 1500, "tpot_ms": 50},
            "live_revision": 1,
            "revisions": [
                _revision(
                    1,
                    "Llama-3.1-8B-Instruct@0e9e39f",
                    "vllm-0-6-3-a100-16k",
                    16384,
                    "gw-2026.01",
                    capabilities=_capabilities(16384, 64, metrics=_VLLM_METRICS),
                ),
                _revision(
                    2,
                    "gemma-2-9b-it@11c9b30",
                    "vllm-0-6-3-a100-8k",
                    8192,
                    "gw-2026.02",
                    based_on=1,
                    notes="Candidate: Gemma 2 9B; its terms are not accepted yet.",
                    capabilities=_capabilities(8192, 32),
                ),
                _revision(
                    3,
                    "aya-expanse-8b@b984857",
                    "vllm-0-6-3-a100-8k",
                    8192,
                    "gw-2026.02",
                    based_on=1,
                    notes="Candidate: Aya Expanse 8B; CC-BY-NC, so not for an external service.",
                    capabilities=_capabilities(8192, 32),
                ),
            ],
        },
        {
            "slug": "kb-assistant",
            "name": "Knowledge-base assistant",
            "description": "Answers questions from the support knowledge base and past tickets.",
            "team": "knowledge-platform",
            "tier": "production",
            "exposure": "customer_data",
            "task_types": ["chat", "rag"],
            "tenants": ["support", "sales", "field-service"],
            "slos": {"ttft_p95_ms": 800, "ttft_p99_ms": 1500, "tpot_ms": 45, "error_rate_pct": 0.5},
            "live_revision": 3,
            "revisions": [
                _revision(
                    1,
                    "Qwen2-7B-Instruct@f2826a0",
                    "vllm-0-5-4-l40s",
                    16384,
                    "gw-2025.08",
                    notes="First production release.",
                    capabilities=_capabilities(16384, 64, **kb_caps),
                ),
                _revision(
                    2,
                    "kb-qwen2.5-7b-ft@v3",
                    "vllm-0-6-3-h100",
                    32768,
                    "gw-2025.11",
                    based_on=1,
                    notes="Fine-tuned on the support knowledge base.",
                    capabilities=_capabilities(
                        32768, 128, structured_output=["json_schema"], tool_calling=True, **kb_caps
                    ),
                ),
                _revision(
                    3,
                    "kb-qwen2.5-7b-ft-awq@v3-awq",
                    "vllm-0-6-3-h100-awq",
                    32768,
                    "gw-2026.01",
                    based_on=2,
                    notes="INT4 AWQ: the same p95 on half the GPU memory.",
                    capabilities=_capabilities(
                        32768, 256, structured_output=["json_schema"], tool_calling=True, **kb_caps
                    ),
                ),
                _revision(
                    4,
                    "kb-qwen2.5-7b-ft-awq@v3-awq",
                    "vllm-0-7-3-h100-awq",
                    32768,
                    "gw-2026.02",
                    based_on=3,
                    notes="Candidate: vLLM 0.7.3 engine upgrade with chunked prefill.",
                    capabilities=_capabilities(
                        32768, 256, structured_output=["json_schema"], tool_calling=True, **kb_caps
                    ),
                ),
            ],
        },
        {
            "slug": "support-summarizer",
            "name": "Support ticket summarizer",
            "description": "Summarizes long support threads for the next agent on shift.",
            "team": "support-ai",
            "tier": "internal",
            "exposure": "internal",
            "task_types": ["summarization"],
            "tenants": ["support"],
            "slos": {"ttft_p95_ms": 2000, "tpot_ms": 80},
            "review_cadence_days": 180,
            "live_revision": 2,
            "revisions": [
                _revision(
                    1,
                    "Mistral-7B-Instruct-v0.3@e0bc86c",
                    "tgi-2-4-0-l4",
                    8192,
                    "gw-2025.10",
                    capabilities=_capabilities(8192, 128, rollback_method="redeploy_previous"),
                ),
                _revision(
                    2,
                    "Phi-3.5-mini-instruct@af0dfb8",
                    "tgi-3-0-1-l4",
                    16384,
                    "gw-2026.01",
                    based_on=1,
                    notes="Phi-3.5 mini: longer threads fit, MIT licensed.",
                    capabilities=_capabilities(16384, 128, rollback_method="redeploy_previous"),
                ),
            ],
        },
    ]


# The revisions each demo service served before the one live now, oldest first.
DEMO_HISTORY: dict[str, list[int]] = {
    "kb-assistant": [1, 2, 3],
    "support-summarizer": [1, 2],
}


def history_documents() -> list[dict[str, Any]]:
    """Earlier states of the demo registry, applied once before `demo_document()`.

    Each says which revision was live then and lists only the revisions that
    existed; assets are still active. Applying them in order, then the demo
    document, leaves a registry whose earlier revisions really served.
    """
    final = demo_document()
    stages = []
    for step in range(max(len(history) for history in DEMO_HISTORY.values()) - 1):
        stage = copy.deepcopy(final)
        for asset in stage["model_assets"]:
            for key in ("lifecycle", "deprecated_on", "retired_on"):
                asset.pop(key, None)
        for service in stage["services"]:
            history = DEMO_HISTORY.get(service["slug"], [service["live_revision"]])
            live = history[min(step, len(history) - 1)]
            service["live_revision"] = live
            service["revisions"] = [r for r in service["revisions"] if r["number"] <= live]
        stages.append(stage)
    return stages
