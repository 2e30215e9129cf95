"""Serializers of the governance room."""
