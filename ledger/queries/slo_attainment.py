"""How a load-test report attains a service's SLOs: for each SLO field, the report column
it reads, the scale to the SLO's unit and which way it compares. The `load_evidence` gate
of a release and the SLO matrix of the service page both judge by this table."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, cast

from ledger.charts import Slo
from ledger.models import LoadTestReport, Service

Bound = Literal["max", "min"]


def attained(bound: Bound, value: float, target: float) -> bool:
    """`value` keeps to `target`: at most it for a "max" bound, at least it for "min"."""
    return value <= target if bound == "max" else value >= target


@dataclass(frozen=True)
class SloCheck:
    key: str  # the SLO matrix's column
    label: str  # as the gate words it: "p95 TTFT", "error rate"
    # The report's column; None when no importer records the number, so no report can
    # attain the SLO or miss it (`unmeasured` says why).
    column: str | None
    slo_field: str  # the service's field; `Slo` names it without the "slo_" prefix
    scale: float  # the report column in the SLO's unit
    unit: str
    bound: Bound
    unmeasured: str = ""

    def measured(self, report: LoadTestReport) -> float | None:
        if self.column is None:
            return None
        value = getattr(report, self.column)
        return None if value is None else value * self.scale

    def target(self, slo: Slo) -> float | None:
        return cast(Mapping[str, float | None], slo).get(self.slo_field.removeprefix("slo_"))

    def target_of(self, service: Service) -> float | None:
        value = getattr(service, self.slo_field)
        return None if value is None else float(value)

    def attained(self, value: float, target: float) -> bool:
        return attained(self.bound, value, target)

    @property
    def missed(self) -> str:
        """How the gate words a measurement on the wrong side of the SLO."""
        return "exceeds" if self.bound == "max" else "is below"


SLO_CHECKS: tuple[SloCheck, ...] = (
    SloCheck("ttft_p95", "p95 TTFT", "ttft_p95_ms", "slo_ttft_p95_ms", 1.0, "ms", "max"),
    SloCheck("ttft_p99", "p99 TTFT", "ttft_p99_ms", "slo_ttft_p99_ms", 1.0, "ms", "max"),
    SloCheck("tpot_p95", "p95 TPOT", "tpot_p95_ms", "slo_tpot_ms", 1.0, "ms", "max"),
    SloCheck("error_rate", "error rate", "error_rate", "slo_error_rate_pct", 100.0, "%", "max"),
    # Table 6-2's performance boundary, from the same first load level as the latencies.
    SloCheck(
        "throughput",
        "output throughput",
        "output_tokens_per_s",
        "slo_min_output_tokens_per_s",
        1.0,
        "tokens/s",
        "min",
    ),
    SloCheck(
        "concurrency",
        "concurrency",
        "concurrency",
        "slo_min_concurrency",
        1.0,
        "requests",
        "min",
    ),
    # Importers count requests as successful, errored or incomplete and never say which
    # timed out (ledger/importers/report.py, Conditions), so no report has a timeout rate.
    SloCheck(
        "timeout_rate",
        "timeout rate",
        None,
        "slo_timeout_rate_pct",
        100.0,
        "%",
        "max",
        unmeasured=(
            "load-test reports do not record timeouts; the periodic review judges it on "
            "the gateway's days"
        ),
    ),
)
SLO_CHECK_BY_KEY: dict[str, SloCheck] = {check.key: check for check in SLO_CHECKS}
