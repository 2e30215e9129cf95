"""Demo data: a believable registry for `make run`, and a fleet for benchmarks."""

from ledger.demo.fleet import FLEET_REVISIONS, fleet_slug, seed_fleet
from ledger.demo.registry import demo_document, digest, history_documents

__all__ = [
    "FLEET_REVISIONS",
    "demo_document",
    "digest",
    "fleet_slug",
    "history_documents",
    "seed_fleet",
]
