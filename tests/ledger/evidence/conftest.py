"""A production service with SLOs, a revision on two GPUs, and helpers to import sample files.

The revision serves what the sample files measured (gemma-3-270m on llama.cpp), so that
they match it; tests of a mismatch make a revision that serves something else.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from ledger import services
from ledger.models import LoadTestReport
from tests.ledger.factories import (
    ModelAssetFactory,
    RevisionFactory,
    RuntimeFactory,
    ServiceFactory,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "loadtest"


def fixture_path(*parts: str) -> Path:
    return FIXTURES.joinpath(*parts)


def upload(
    *parts: str, content: bytes | None = None, name: str | None = None
) -> SimpleUploadedFile:
    """A sample file as the upload form or the API hands it to the verb."""
    path = fixture_path(*parts)
    data = path.read_bytes() if content is None else content
    return SimpleUploadedFile(name or path.name, data)


def import_file(
    revision, *parts: str, actor=None, workload: str = "short", **kwargs
) -> tuple[LoadTestReport, bool]:
    file = upload(*parts)
    return services.import_loadtest_report(
        revision, actor=actor, workload=workload, file=file, filename=file.name, **kwargs
    )


@pytest.fixture
def service(team):
    return ServiceFactory(
        slug="kb-assistant",
        team=team,
        tier="production",
        slo_ttft_p95_ms=800,
        slo_ttft_p99_ms=1500,
        slo_tpot_ms=30,
        slo_error_rate_pct=Decimal("1.00"),
    )


def sample_runtime(team, **overrides):
    """llama.cpp on 2 x H100: the engine the sample files name (`server: llama-cpp-python`)."""
    fields = {
        "engine": "llama_cpp",
        "engine_version": "0.3.36",
        "launch_parameters": {},
        "gpu_model": "H100-80GB",
        "gpu_count": 2,
        **overrides,
    }
    return RuntimeFactory(team=team, **fields)


def sample_asset(team):
    """The model the sample files measured (their `model` / `model_id` is gemma-3-270m)."""
    return ModelAssetFactory(
        team=team, name="gemma-3-270m-q4_k_m", source_repository="google/gemma-3-270m"
    )


@pytest.fixture
def runtime(team):
    return sample_runtime(team)


@pytest.fixture
def gemma(team):
    return sample_asset(team)


@pytest.fixture
def revision(service, runtime, gemma):
    return RevisionFactory(service=service, runtime=runtime, model_asset=gemma)
