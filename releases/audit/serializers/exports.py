"""Exports and webhook subscriptions over REST."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from ledger.models import Service
from releases.audit.records import AuditFilters
from releases.audit.webhook_types import EVENT_TYPES
from releases.models import Delivery, Export, Release, WebhookSubscription


class ExportSerializer(serializers.ModelSerializer):
    requested_by: serializers.SlugRelatedField = serializers.SlugRelatedField(
        slug_field="username", read_only=True
    )
    chain_head = serializers.SerializerMethodField()

    class Meta:
        model = Export
        fields = [
            "id",
            "requested_by",
            "format",
            "period_start",
            "period_end",
            "filters",
            "state",
            "progress",
            "progress_note",
            "filename",
            "sha256",
            "size",
            "chain_head",
            "record_counts",
            "error",
            "created_at",
            "started_at",
            "finished_at",
        ]
        read_only_fields = fields

    def get_chain_head(self, export: Export) -> dict[str, Any] | None:
        """The chain head (sequence, hash) the export covers, once it is ready."""
        if export.chain_head_sequence is None:
            return None
        return {"sequence": export.chain_head_sequence, "hash": export.chain_head_hash}


class ExportRequestSerializer(serializers.Serializer):
    format = serializers.ChoiceField(choices=Export.Format.choices)
    since = serializers.DateTimeField(
        required=False, allow_null=True, help_text="Start, inclusive. Empty: the beginning."
    )
    until = serializers.DateTimeField(
        required=False, allow_null=True, help_text="End, exclusive. Empty: now."
    )
    service = serializers.SlugRelatedField(
        slug_field="slug", queryset=Service.objects.all(), required=False, allow_null=True
    )
    tier = serializers.ChoiceField(choices=Service.Tier.choices, required=False)
    change_kind = serializers.ChoiceField(choices=Release.ChangeKind.choices, required=False)
    path = serializers.ChoiceField(choices=Release.Path.choices, required=False)
    state = serializers.ChoiceField(
        choices=Release.State.choices, required=False, help_text="The release's state."
    )

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        since, until = data.get("since"), data.get("until")
        if since and until and until <= since:
            raise serializers.ValidationError({"until": "The period ends before it starts."})
        return data

    def filters(self) -> AuditFilters:
        data = self.validated_data
        service = data.get("service")
        return AuditFilters(
            since=data.get("since"),
            until=data.get("until"),
            service=service.slug if service else "",
            tier=data.get("tier", ""),
            change_kind=data.get("change_kind", ""),
            path=data.get("path", ""),
            state=data.get("state", ""),
        )


class DownloadLinkSerializer(serializers.Serializer):
    url = serializers.CharField(help_text="Where to GET the file; expires at expires_at.")
    expires_at = serializers.DateTimeField()
    sha256 = serializers.CharField(help_text="The file's sha256, to check after download.")


class WebhookSubscriptionSerializer(serializers.ModelSerializer):
    class Meta:
        model = WebhookSubscription
        fields = [
            "id",
            "name",
            "url",
            "event_types",
            "state",
            "paused_reason",
            "failing_since",
            "cursor",
            "created_at",
        ]
        read_only_fields = fields


class WebhookSubscriptionCreatedSerializer(WebhookSubscriptionSerializer):
    """The answer to a creation: the only time the secret is shown."""

    secret = serializers.CharField(
        read_only=True, help_text="The signing secret (whsec_…): shown this once."
    )

    class Meta(WebhookSubscriptionSerializer.Meta):
        fields = [*WebhookSubscriptionSerializer.Meta.fields, "secret"]
        read_only_fields = fields


class WebhookSubscriptionRequestSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=120)
    url = serializers.URLField(max_length=500)
    event_types = serializers.ListField(
        child=serializers.ChoiceField(choices=list(EVENT_TYPES)), allow_empty=False
    )


class DeliverySerializer(serializers.ModelSerializer):
    event = serializers.IntegerField(source="event.sequence", read_only=True)

    class Meta:
        model = Delivery
        fields = [
            "id",
            "event",
            "event_type",
            "message_id",
            "state",
            "attempts",
            "response_code",
            "latency_ms",
            "error",
            "next_attempt_at",
            "last_attempt_at",
            "delivered_at",
            "created_at",
        ]
        read_only_fields = fields


class ResendRequestSerializer(serializers.Serializer):
    delivery = serializers.IntegerField(help_text="The id of the delivery to send again.")
