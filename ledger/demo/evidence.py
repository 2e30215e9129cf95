"""Demo load-test evidence, so the revision and service pages `make run` opens have charts.

Through the domain verbs, idempotent: a report is found again by its sha256.

The files are real reports of gemma-3-270m served by llama-cpp-python on CPU
(the shared samples), not of the demo revisions: they are attached with the
recorded reason below, so the demo shows them as *mismatched*, as it would any
evidence measured on another model.
"""

from __future__ import annotations

from pathlib import Path

from ledger.models import Revision, Service
from ledger.services import import_loadtest_report

LOADTEST_DIR = Path(__file__).resolve().parent / "loadtest"
DEMO_MISMATCH_REASON = (
    "demo data: a real report of gemma-3-270m on llama-cpp-python (CPU), attached to show "
    "the evidence pages; it did not measure this revision"
)
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
                revision,
                actor=None,
                workload=workload,
                file=raw,
                filename=filename,
                accept_mismatch=DEMO_MISMATCH_REASON,
            )
        created_count += created
    return created_count
