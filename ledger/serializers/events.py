"""Serializers of the event ledger."""

from __future__ import annotations

from rest_framework import serializers

from ledger.models import Event


class EventSerializer(serializers.ModelSerializer):
    actor = serializers.CharField(
        source="actor_label", read_only=True, help_text="Username at the time, or 'system'."
    )
    payload = serializers.DictField(
        source="payload_data", read_only=True, help_text="The canonical JSON payload, parsed."
    )

    class Meta:
        model = Event
        fields = [
            "sequence",
            "created_at",
            "actor",
            "action",
            "subject_type",
            "subject_id",
            "subject_label",
            "payload",
            "prev_hash",
            "hash",
            "key_id",
            "signature",
        ]
        read_only_fields = fields


class CheckpointCheckSerializer(serializers.Serializer):
    ok = serializers.BooleanField(help_text="The chain still reaches the checkpoint, unchanged.")
    sequence = serializers.IntegerField(allow_null=True, help_text="The head it recorded.")
    hash = serializers.CharField(allow_null=True)
    taken_at = serializers.DateTimeField(allow_null=True)
    key_id = serializers.CharField(allow_null=True, help_text="The signing key's id.")
    problem = serializers.CharField(allow_blank=True)


class ChainReportSerializer(serializers.Serializer):
    ok = serializers.BooleanField(
        help_text="Every event verifies and the chain reaches the newest checkpoint."
    )
    count = serializers.IntegerField(help_text="Events verified.")
    head_hash = serializers.CharField(help_text="Hash of the last event that verified.")
    first_bad_sequence = serializers.IntegerField(allow_null=True)
    problem = serializers.CharField(allow_blank=True)
    signatures_from = serializers.IntegerField(
        help_text="Each event's signature was checked from this sequence on; those before "
        "were checked when the newest checkpoint was taken, whose hash the chain still reaches."
    )
    checkpoint = CheckpointCheckSerializer(
        allow_null=True, help_text="The newest signed checkpoint; null when none was taken yet."
    )
