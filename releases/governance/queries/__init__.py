"""Reads and verdicts of the governance room."""
