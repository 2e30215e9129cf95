"""Reads and verdicts of the reviews room."""
