"""The ledger's read side: named reads, verdicts and comparisons. Nothing here writes.

Split by feature; import from this package (`from ledger import queries`).
Release gates read `current_reports`, `evidence_status`, `slo_matrix` and
`license_findings`; the release page and the rollback target check read
`revision_diff`; pages read the rest.
"""

from ledger.queries.capacity import (
    Capacity,
    capacity_from_levels,
    gpu_hours_per_million,
    level_within_slo,
    load_axis,
    load_of,
    pct,
    report_capacity,
)
from ledger.queries.chart_data import latency_point, latency_points, level_points, ttft_cdf_series
from ledger.queries.compliance import ALLOWED_EXPOSURES, Finding, license_findings
from ledger.queries.diff import Change, breaking_changes, has_breaking, revision_diff
from ledger.queries.events import FieldChange, event_changes
from ledger.queries.goodput import (
    GOODPUT_TARGET,
    GoodputResult,
    goodput_of,
    goodput_slo,
    level_goodputs,
    needs_recompute,
    report_goodput,
    service_slo,
)
from ledger.queries.registry import (
    FingerprintCheck,
    capabilities_of,
    fingerprint_check,
    fingerprint_twins,
    same_fingerprint,
    service_revisions,
)
from ledger.queries.reports import (
    RevisionReports,
    attach_goodputs,
    revision_reports,
    shaped_levels,
)
from ledger.queries.serving import ServingInterval, serving_at, serving_history
from ledger.queries.slo_matrix import (
    MATRIX_COLUMNS,
    Attainment,
    Comparison,
    MatrixCell,
    MatrixColumn,
    MatrixRevision,
    MatrixRow,
    SloMatrix,
    live_vs_candidate,
    slo_matrix,
)
from ledger.queries.staleness import (
    EvidenceStatus,
    StatusWord,
    current_reports,
    evidence_status,
    max_age_days,
    newest_by_workload,
)

__all__ = [
    "ALLOWED_EXPOSURES",
    "GOODPUT_TARGET",
    "MATRIX_COLUMNS",
    "Attainment",
    "Capacity",
    "Change",
    "Comparison",
    "EvidenceStatus",
    "FieldChange",
    "Finding",
    "FingerprintCheck",
    "GoodputResult",
    "MatrixCell",
    "MatrixColumn",
    "MatrixRevision",
    "MatrixRow",
    "RevisionReports",
    "ServingInterval",
    "SloMatrix",
    "StatusWord",
    "attach_goodputs",
    "breaking_changes",
    "capabilities_of",
    "capacity_from_levels",
    "current_reports",
    "event_changes",
    "evidence_status",
    "fingerprint_check",
    "fingerprint_twins",
    "goodput_of",
    "goodput_slo",
    "gpu_hours_per_million",
    "has_breaking",
    "latency_point",
    "latency_points",
    "level_goodputs",
    "level_points",
    "level_within_slo",
    "license_findings",
    "live_vs_candidate",
    "load_axis",
    "load_of",
    "max_age_days",
    "needs_recompute",
    "newest_by_workload",
    "pct",
    "report_capacity",
    "report_goodput",
    "revision_diff",
    "revision_reports",
    "same_fingerprint",
    "service_revisions",
    "service_slo",
    "serving_at",
    "serving_history",
    "shaped_levels",
    "slo_matrix",
    "ttft_cdf_series",
]
