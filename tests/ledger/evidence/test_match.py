"""Does a file's model, engine and GPU match the revision: names compared after normalising."""

from __future__ import annotations

import pytest

from ledger.engines import Engine
from ledger.models import ModelAsset, Revision, Runtime
from ledger.queries import (
    file_identity,
    match_evidence,
    normalise_engine,
    normalise_gpu,
    normalise_model_name,
)


@pytest.mark.parametrize(
    ("name", "normal"),
    [
        ("gemma-3-270m", "gemma-3-270m"),
        ("google/gemma-3-270m", "gemma-3-270m"),
        ("Qwen/Qwen2.5-7B-Instruct", "qwen2.5-7b-instruct"),
        ("  Qwen2.5-7B-Instruct ", "qwen2.5-7b-instruct"),
        ("hf.co/org/Model_Name.gguf", "model-name"),
        ("./tokenizer/gemma-3-270m/", "gemma-3-270m"),
    ],
)
def test_model_names_compare_by_their_last_segment_without_case(name, normal):
    assert normalise_model_name(name) == normal


@pytest.mark.parametrize(
    ("name", "engine"),
    [
        ("vllm", Engine.VLLM),
        ("vLLM", Engine.VLLM),
        ("vllm-0.6.3", Engine.VLLM),
        ("vLLM 0.32.0", Engine.VLLM),
        ("vllm/v0.6.3", Engine.VLLM),
        ("vllm-cpu", Engine.VLLM),
        ("llama.cpp", Engine.LLAMA_CPP),
        ("llama-cpp-python", Engine.LLAMA_CPP),
        ("llama-cpp-python-0.3.36", Engine.LLAMA_CPP),
        ("llama_cpp", Engine.LLAMA_CPP),
        ("llama-server", Engine.LLAMA_CPP),
        ("SGLang", Engine.SGLANG),
        ("text-generation-inference", Engine.TGI),
        ("TGI 2.4.0", Engine.TGI),
        ("TensorRT-LLM", Engine.TENSORRT_LLM),
        ("trtllm", Engine.TENSORRT_LLM),
        ("ollama", Engine.OLLAMA),
        ("LMDeploy", Engine.LMDEPLOY),
        ("my-own-server", None),
        ("openai-chat", None),
    ],
)
def test_engine_aliases(name, engine):
    assert normalise_engine(name) == engine


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("NVIDIA H100 80GB HBM3", "H100-80GB", True),
        ("h100", "H100-80GB", True),
        ("NVIDIA A100-SXM4-40GB", "A100-40GB", True),
        ("NVIDIA GeForce RTX 4090", "RTX 4090", True),
        ("NVIDIA L40S", "L40S", True),
        ("H100-80GB", "A100-80GB", False),
        ("L40S", "L40", False),
    ],
)
def test_gpu_names_compare_without_vendor_and_memory(a, b, same):
    assert (normalise_gpu(a) == normalise_gpu(b)) is same


def test_the_file_identity_reads_model_server_and_hardware_but_not_the_client_backend():
    meta = {
        "model_id": "gemma-3-270m",
        "server": "llama-cpp-python-0.3.36",
        "backend": "openai-chat",
        "gpu_type": "H100",
        "num_gpus": 2,
    }

    found = file_identity(meta)

    assert (found.model, found.engine, found.gpu_model, found.gpu_count) == (
        "gemma-3-270m",
        "llama-cpp-python-0.3.36",
        "H100",
        2,
    )
    assert file_identity({"backend": "vllm-chat"}).engine is None


def _revision(
    *,
    name="Qwen2.5-7B-Instruct",
    repo="Qwen/Qwen2.5-7B-Instruct",
    engine="vllm",
    gpu="H100-80GB",
    count=1,
    params=None,
):
    """An unsaved revision: the match reads only its asset and runtime."""
    return Revision(
        number=3,
        model_asset=ModelAsset(name=name, source_repository=repo),
        runtime=Runtime(
            name="rt", engine=engine, gpu_model=gpu, gpu_count=count, launch_parameters=params or {}
        ),
    )


def test_the_issues_vllm_report_of_gemma_on_llama_cpp_differs_in_model_and_engine():
    meta = {"model_id": "gemma-3-270m", "server": "llama-cpp-python-0.3.36"}

    match = match_evidence(_revision(), meta)

    assert not match.matches
    assert match.fields == ["model", "engine"]
    assert match.summary("r3") == (
        "model: the file says gemma-3-270m; r3 serves Qwen2.5-7B-Instruct; "
        "engine: the file says llama-cpp-python-0.3.36 (llama.cpp); r3 runs on vLLM"
    )
    assert match.expected["engine"] == "vLLM"


def test_a_file_naming_the_repository_or_the_served_name_matches():
    assert match_evidence(_revision(), {"model": "Qwen/Qwen2.5-7B-Instruct"}).matches
    assert match_evidence(_revision(), {"model": "qwen2.5-7b-instruct"}).matches
    served = _revision(params={"served_model_name": "kb-chat"})
    assert match_evidence(served, {"model": "kb-chat", "server": "vLLM 0.6.3"}).matches
    several = _revision(params={"served_model_name": ["kb-chat", "kb"]})
    assert match_evidence(several, {"model": "kb"}).matches


def test_what_the_file_does_not_say_is_not_held_against_it():
    assert match_evidence(_revision(), {}).matches
    # Nor a GPU model the runtime does not name.
    assert match_evidence(_revision(gpu=""), {"gpu": "A100"}).matches


def test_other_gpus_differ_in_model_and_count():
    match = match_evidence(_revision(count=2), {"gpu_model": "NVIDIA A100 80GB", "gpu_count": 8})

    assert match.fields == ["gpu_model", "gpu_count"]
    assert "GPU: the file says NVIDIA A100 80GB; r3 runs on H100-80GB" in match.summary("r3")
    assert match_evidence(_revision(), {"gpu_model": "NVIDIA H100 80GB HBM3"}).matches


def test_an_unknown_server_is_a_difference_that_says_so():
    match = match_evidence(_revision(), {"server": "my-own-server"})

    assert match.differences == [
        {"field": "engine", "file": "my-own-server (an unknown engine)", "revision": "vLLM"}
    ]
