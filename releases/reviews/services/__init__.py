"""Verbs that write of the reviews room."""
