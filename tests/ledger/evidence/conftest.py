"""A production service with SLOs, a revision on two GPUs, and helpers to import sample files."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from ledger import services
from ledger.models import LoadTestReport
from tests.ledger.factories import RevisionFactory, RuntimeFactory, ServiceFactory

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


@pytest.fixture
def runtime(team):
    return RuntimeFactory(team=team, gpu_model="H100-80GB", gpu_count=2)


@pytest.fixture
def revision(service, runtime):
    return RevisionFactory(service=service, runtime=runtime)
