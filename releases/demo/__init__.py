"""The demo's releases, rollouts, periodic reviews and a drifted gateway, built through
the same verbs as the pages (`manage.py seed_demo` runs them after the ledger's and
replay's demo)."""

from releases.demo.analysis import seed_canary_lab
from releases.demo.drills import seed_drills
from releases.demo.gateway import seed_gateway_drift
from releases.demo.releases import seed_releases
from releases.demo.reviews import seed_reviews
from releases.demo.rollouts import seed_rollouts
from releases.demo.traces import DEMO_TRACE, seed_traces

__all__ = [
    "DEMO_TRACE",
    "seed_canary_lab",
    "seed_drills",
    "seed_gateway_drift",
    "seed_releases",
    "seed_reviews",
    "seed_rollouts",
    "seed_traces",
]
