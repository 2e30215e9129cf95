"""The demo's releases, rollouts and periodic reviews, built through the same verbs as
the pages (`manage.py seed_demo` runs them after the ledger's and replay's demo)."""

from releases.demo.releases import seed_releases
from releases.demo.reviews import seed_reviews
from releases.demo.rollouts import seed_rollouts

__all__ = ["seed_releases", "seed_reviews", "seed_rollouts"]
