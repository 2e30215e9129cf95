"""Forms of the audit room."""
