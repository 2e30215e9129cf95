"""API viewsets of the governance room."""
