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


TENANTS = ["finance", "sales", "support"]
TASK_TYPES = ["chat", "rag", "sql", "summarize"]


@pytest.fixture
def service(team):
    return ServiceFactory(
        slug="kb-assistant",
        team=team,
        tier="production",
        tenants=TENANTS,
        task_types=TASK_TYPES,
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


def breakdown_row(index: int, **overrides):
    """Row `index` of a day: its own (tenant, task type, backend), counts that vary with it."""
    row = {
        "tenant": TENANTS[index % len(TENANTS)],
        "task_type": TASK_TYPES[(index // len(TENANTS)) % len(TASK_TYPES)],
        "backend": f"vllm-{index // (len(TENANTS) * len(TASK_TYPES))}",
        "requests": 400 + index,
        "input_tokens": 90_000 + 7 * index,
        "output_tokens": 30_000 + 3 * index,
        "error_counts": {"429": 2, "503": index % 2},
        "rate_limit_hits": 2,
        "timeouts": index % 3,
        "retries": 1,
        "degradations": {"shorter-context": index % 4},
        "truncations": 5,
        "refusals": 2,
        "structured_errors": index % 2,
        "returned_by_humans": 1,
        "latency": {
            "ttft_p50_ms": 150.0 + index,
            "ttft_p95_ms": 500.0 + index,
            "ttft_p99_ms": 900.0 + index,
            "tpot_p50_ms": 15.0,
            "tpot_p95_ms": 24.0,
            "tpot_p99_ms": 30.0,
        },
    }
    row.update(overrides)
    return row


def breakdown_rows(count: int):
    return [breakdown_row(index) for index in range(count)]


def totals_of(rows):
    """The day's totals the rows add up to (rates as the rows' counts over the requests)."""
    requests = sum(row["requests"] for row in rows)
    totals = {
        name: sum(row.get(name, 0) for row in rows)
        for name in (
            "requests",
            "input_tokens",
            "output_tokens",
            "rate_limit_hits",
            "timeouts",
            "retries",
            "returned_by_humans",
        )
    }
    for name in ("error_counts", "degradations"):
        summed: dict[str, int] = {}
        for row in rows:
            for key, value in row.get(name, {}).items():
                summed[key] = summed.get(key, 0) + value
        totals[name] = summed
    errors_4xx = sum(row["error_counts"].get("429", 0) for row in rows)
    errors_5xx = sum(row["error_counts"].get("503", 0) for row in rows)
    totals["rate_4xx"] = errors_4xx / requests
    totals["rate_5xx"] = errors_5xx / requests
    totals["refusal_rate"] = sum(row["refusals"] for row in rows) / requests
    totals["truncation_rate"] = sum(row["truncations"] for row in rows) / requests
    totals["structured_output_error_rate"] = (
        sum(row["structured_errors"] for row in rows) / requests
    )
    return totals


def day_with_rows(rows, **overrides):
    """A gateway day whose totals are the sums of `rows`, the rows as its breakdown."""
    return day(**{**totals_of(rows), "breakdown": rows, **overrides})
