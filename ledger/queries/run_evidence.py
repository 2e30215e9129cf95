"""Reading daily run evidence: a summary as JSON, and a service's trend against its SLOs."""

from __future__ import annotations

from typing import Any

from ledger.models import RunSummary
from ledger.models.run_evidence import RUN_SUMMARY_FIELDS


def run_summary_json(summary: RunSummary) -> dict[str, Any]:
    """What `manage.py import_metrics` prints: the stored day, every field."""
    return {
        "service": summary.service.slug,
        "date": summary.date.isoformat(),
        "source": summary.source,
        "revision": summary.revision.label if summary.revision else None,
        **{name: getattr(summary, name) for name in RUN_SUMMARY_FIELDS},
        "error_rate": summary.error_rate,
        "recorded_at": summary.recorded_at.isoformat(),
    }
