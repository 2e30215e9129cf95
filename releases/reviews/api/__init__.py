"""API viewsets of the reviews room."""
