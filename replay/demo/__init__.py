"""The demo's replay backends and sample sets (`manage.py seed_demo`)."""

from replay.demo.backends import DEMO_BACKEND_URL, seed_replay, unmonitor_demo_backends

__all__ = ["DEMO_BACKEND_URL", "seed_replay", "unmonitor_demo_backends"]
