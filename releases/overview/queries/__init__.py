"""Reads and verdicts of the overview room."""
