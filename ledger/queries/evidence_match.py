"""Was a load-test file measured on what the revision serves: its model, engine and GPUs?

Benchmark tools write what they measured into the file: the model name the
server answered to (`model`, `model_id`), often the server (`--metadata
server=…` of `vllm bench serve`) and sometimes the hardware. `match_evidence`
compares those with the revision; the import refuses a difference unless a
reason is recorded, and such a report is `mismatched` everywhere it is shown.

Names are compared after normalising them: a model by its last path segment
(`google/gemma-3-270m` is `gemma-3-270m`), an engine through its aliases
(`vLLM`, `vllm-0.6.3` and `vllm` are one; `llama-cpp-python` is llama.cpp),
a GPU by its model without vendor and memory (`NVIDIA H100 80GB HBM3` is
`H100-80GB`). What the file does not say is not held against it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

from ledger.engines import Engine
from ledger.models import LoadTestReport, Revision

__all__ = [
    "EvidenceMatch",
    "FileIdentity",
    "Mismatch",
    "file_identity",
    "match_evidence",
    "mismatched_reports",
    "normalise_engine",
    "normalise_gpu",
    "normalise_model_name",
]

# Keys of a report's metadata (ParsedReport.meta) that say what was measured.
MODEL_KEYS = ("model", "model_id", "model_name", "served_model_name")
# Not `backend`: in vLLM's and SGLang's benchmarks that is the client's request format.
ENGINE_KEYS = ("engine", "server", "inference_server", "server_engine")
GPU_MODEL_KEYS = ("gpu_model", "gpu_type", "gpu")
GPU_COUNT_KEYS = ("gpu_count", "num_gpus")

# Spellings of each engine, compared without case, punctuation or a trailing version.
_ENGINE_ALIASES: dict[str, Engine] = {
    "vllm": Engine.VLLM,
    "vllmopenai": Engine.VLLM,
    "vllmcpu": Engine.VLLM,
    "sglang": Engine.SGLANG,
    "lmdeploy": Engine.LMDEPLOY,
    "tgi": Engine.TGI,
    "textgenerationinference": Engine.TGI,
    "huggingfacetgi": Engine.TGI,
    "ollama": Engine.OLLAMA,
    "llamacpp": Engine.LLAMA_CPP,
    "llamacpppython": Engine.LLAMA_CPP,
    "llamacppserver": Engine.LLAMA_CPP,
    "llamaserver": Engine.LLAMA_CPP,
    "tensorrtllm": Engine.TENSORRT_LLM,
    "trtllm": Engine.TENSORRT_LLM,
}
_TRAILING_VERSION = re.compile(r"[\s/_@:=-]*v?\d+(?:[.\-_]\w+)*$")
_GPU_NOISE = re.compile(
    r"\b(?:nvidia|amd|tesla|geforce|radeon|instinct|\d+\s*gb|hbm\d*e?|gddr\d*x?|pcie|sxm\d*|nvl)\b"
)


def normalise_model_name(name: str) -> str:
    """`Org/Model-Name.gguf` -> `model-name`: the last path segment, lowercase."""
    last = name.strip().rstrip("/").rsplit("/", 1)[-1].lower()
    return last.removesuffix(".gguf").replace("_", "-")


def normalise_engine(name: str) -> Engine | None:
    """The engine a server name stands for, or None when it is none the ledger knows."""
    bare = _TRAILING_VERSION.sub("", name.strip().lower())
    return _ENGINE_ALIASES.get(re.sub(r"[^a-z0-9]", "", bare))


def normalise_gpu(name: str) -> str:
    """`NVIDIA H100 80GB HBM3` and `H100-80GB` -> `h100`; `GeForce RTX 4090` -> `rtx4090`."""
    return re.sub(r"[^a-z0-9]", "", _GPU_NOISE.sub(" ", name.lower()))


@dataclass(frozen=True)
class FileIdentity:
    """What a file says it measured; None where it does not say."""

    model: str | None = None
    engine: str | None = None
    gpu_model: str | None = None
    gpu_count: int | None = None


def _first_text(meta: Mapping[str, Any], keys: Iterable[str]) -> str | None:
    for key in keys:
        value = meta.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def file_identity(meta: Mapping[str, Any]) -> FileIdentity:
    count = next(
        (
            meta[k]
            for k in GPU_COUNT_KEYS
            if isinstance(meta.get(k), int) and not isinstance(meta.get(k), bool)
        ),
        None,
    )
    return FileIdentity(
        model=_first_text(meta, MODEL_KEYS),
        engine=_first_text(meta, ENGINE_KEYS),
        gpu_model=_first_text(meta, GPU_MODEL_KEYS),
        gpu_count=count,
    )


class Difference(TypedDict):
    field: str  # model | engine | gpu_model | gpu_count
    file: str
    revision: str


class Mismatch(TypedDict):
    """`LoadTestReport.mismatch` when set: what differed, and why it was attached anyway."""

    fields: list[str]
    reason: str
    differences: list[Difference]


def served_model_names(revision: Revision) -> list[str]:
    """The names the revision answers to: the engine's served_model_name, else the asset's."""
    served = revision.runtime.launch_parameters.get("served_model_name")
    names = [served] if isinstance(served, str) else served if isinstance(served, list) else []
    asset = revision.model_asset
    names = [*names, asset.name, asset.source_repository]
    return [n for n in names if isinstance(n, str) and n.strip()]


@dataclass(frozen=True)
class EvidenceMatch:
    found: FileIdentity
    expected: dict[str, str]  # model, engine, gpu as the revision has them, for a page
    differences: list[Difference] = field(default_factory=list)

    @property
    def matches(self) -> bool:
        return not self.differences

    @property
    def fields(self) -> list[str]:
        return [d["field"] for d in self.differences]

    def summary(self, label: str) -> str:
        """`model: the file says gemma-3-270m; r3 serves Qwen2.5-7B-Instruct` and so on."""
        return "; ".join(describe(d, label) for d in self.differences)


_FIELD_WORDS = {"model": "model", "engine": "engine", "gpu_model": "GPU", "gpu_count": "GPU count"}


def describe(difference: Difference, label: str) -> str:
    what = _FIELD_WORDS.get(difference["field"], difference["field"])
    verb = "serves" if difference["field"] == "model" else "runs on"
    return f"{what}: the file says {difference['file']}; {label} {verb} {difference['revision']}"


def match_evidence(revision: Revision, meta: Mapping[str, Any]) -> EvidenceMatch:
    """Compare what a file says it measured (its parsed `meta`) with `revision`.

    Reads revision.runtime and revision.model_asset.
    """
    found = file_identity(meta)
    runtime = revision.runtime
    names = served_model_names(revision)
    engine = Engine(runtime.engine)
    gpu = f"{runtime.gpu_count} x {runtime.gpu_model or 'unnamed GPU'}"
    expected = {"model": " or ".join(dict.fromkeys(names)), "engine": engine.label, "gpu": gpu}
    differences: list[Difference] = []
    if found.model and normalise_model_name(found.model) not in {
        normalise_model_name(n) for n in names
    }:
        differences.append({"field": "model", "file": found.model, "revision": names[0]})
    if found.engine and normalise_engine(found.engine) != engine:
        known = normalise_engine(found.engine)
        said = f"{found.engine} ({known.label})" if known else f"{found.engine} (an unknown engine)"
        differences.append({"field": "engine", "file": said, "revision": engine.label})
    if (
        found.gpu_model
        and runtime.gpu_model
        and normalise_gpu(found.gpu_model) != normalise_gpu(runtime.gpu_model)
    ):
        differences.append(
            {"field": "gpu_model", "file": found.gpu_model, "revision": runtime.gpu_model}
        )
    if found.gpu_count is not None and found.gpu_count != runtime.gpu_count:
        differences.append(
            {
                "field": "gpu_count",
                "file": f"{found.gpu_count} GPU(s)",
                "revision": f"{runtime.gpu_count} GPU(s)",
            }
        )
    return EvidenceMatch(found=found, expected=expected, differences=differences)


def mismatched_reports(revision: Revision) -> list[LoadTestReport]:
    """The revision's reports attached despite measuring another model, engine or GPU,
    newest first: what a release gate names when it refuses or waives them."""
    return list(
        LoadTestReport.objects.with_context()
        .filter(revision=revision)
        .filter(mismatch__has_key="reason")
        .order_by("-measured_at", "-id")
    )
