"""Replay pages, one module per feature: backends, schedules, sample sets, runs."""
