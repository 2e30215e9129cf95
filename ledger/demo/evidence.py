"""Demo load-test evidence, so the revision and service pages `make run` opens have charts.

Through the domain verbs, idempotent: a report is found again by its sha256.
"""

from __future__ import annotations

from pathlib import Path

from ledger.models import Revision, Service
from ledger.services import import_loadtest_report

LOADTEST_DIR = Path(__file__).resolve().parent / "loadtest"
# (service, revision number or None for the live one, workload, file)
DEMO_REPORTS = [
    ("kb-assistant", None, "short", "vllm_c2_n20_detailed.json"),
    ("kb-assistant", None, "high_concurrency", "guidellm_rate_sweep.json"),
]


def seed_evidence() -> int:
    """Attach the demo load-test reports; returns how many were new."""
    created_count = 0
    for slug, number, workload, filename in DEMO_REPORTS:
        service = Service.objects.filter(slug=slug).select_related("live_revision").first()
        if service is None:
            continue
        revision = (
            service.live_revision
            if number is None
            else Revision.objects.filter(service=service, number=number).first()
        )
        if revision is None:
            continue
        with (LOADTEST_DIR / filename).open("rb") as raw:
            _, created = import_loadtest_report(
                revision, actor=None, workload=workload, file=raw, filename=filename
            )
        created_count += created
    return created_count
