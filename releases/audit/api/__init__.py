"""API viewsets of the audit room."""
