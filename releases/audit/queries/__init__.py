"""Reads and verdicts of the audit room."""
