"""Serializers of the audit room."""
