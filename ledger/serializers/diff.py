"""The shape of a revision diff over REST: `{changes: [{field, from, to, breaking, why}]}`."""

from __future__ import annotations

from rest_framework import serializers


class RevisionChangeSerializer(serializers.Serializer):
    """One field that differs (`ledger.queries.Change`)."""

    field = serializers.CharField(
        help_text="What differs, e.g. context_limit, launch_parameters.max_model_len, "
        "capabilities.tool_calling."
    )
    to = serializers.JSONField(
        allow_null=True, help_text="Its value in the other revision; null: unset or not declared."
    )
    breaking = serializers.BooleanField(help_text="Whether the change breaks callers.")
    why = serializers.CharField(
        allow_blank=True,
        help_text="What it means for callers, in plain words; empty or short when it breaks nothing.",
    )

    def get_fields(self):
        # `from` is a Python keyword, so it cannot be declared above; it goes second.
        fields = super().get_fields()
        value_from = serializers.JSONField(
            allow_null=True, help_text="Its value in this revision; null: unset or not declared."
        )
        return {"field": fields.pop("field"), "from": value_from, **fields}


class RevisionDiffSerializer(serializers.Serializer):
    changes = RevisionChangeSerializer(
        many=True, help_text="Every field that differs: breaking changes first, then by field."
    )
