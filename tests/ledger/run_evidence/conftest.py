"""A production service with SLOs and a live revision, and the Prometheus fixtures."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from ledger import services
from tests.ledger.factories import RevisionFactory, ServiceFactory

PROMETHEUS = Path(__file__).resolve().parents[2] / "fixtures" / "prometheus"


def scrape_text(name: str) -> str:
    return (PROMETHEUS / name).read_text()


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
def live(service):
    revision = RevisionFactory(service=service)
    services.set_live_revision(service, revision, actor=None, reason="test")
    return revision


def day(**overrides):
    """A plausible gateway day; overrides replace or add fields."""
    fields = {
        "requests": 12000,
        "ttft_p50_ms": 180.0,
        "ttft_p95_ms": 620.0,
        "ttft_p99_ms": 1100.0,
        "tpot_p50_ms": 18.0,
        "tpot_p95_ms": 26.0,
        "tpot_p99_ms": 31.0,
        "e2e_p50_ms": 2100.0,
        "e2e_p95_ms": 5200.0,
        "e2e_p99_ms": 8800.0,
        "error_counts": {"429": 30, "503": 6},
        "rate_4xx": 0.0025,
        "rate_5xx": 0.0005,
        "refusal_rate": 0.01,
        "structured_output_error_rate": 0.002,
        "truncation_rate": 0.03,
        "cache_hit_rate": 0.41,
        "degradations": {"shorter-context": 40},
        "rate_limit_hits": 30,
        "timeouts": 4,
        "retries": 11,
        "returned_by_humans": 3,
    }
    fields.update(overrides)
    return fields
