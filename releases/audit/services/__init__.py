"""Verbs that write of the audit room."""
