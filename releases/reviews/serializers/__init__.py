"""Serializers of the reviews room."""
