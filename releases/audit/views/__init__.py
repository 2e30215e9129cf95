"""Pages of the audit room."""
