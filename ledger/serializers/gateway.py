"""Gateway policy versions over the API: record one, list them, read one, and the
version in force (the live revision's)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from ledger.gateway_policy import openapi_schema
from ledger.models import GatewayPolicy


@extend_schema_field(openapi_schema())
class PolicyDocumentField(serializers.JSONField):
    """The policy document; its schema is ledger/schemas/gateway_policy.schema.json."""


class GatewayPolicySerializer(serializers.ModelSerializer):
    service: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        read_only=True, slug_field="slug"
    )
    label = serializers.CharField(  # type: ignore[assignment]
        read_only=True, help_text="How revisions name it: v2, or gw-2026.03 (known by name only)."
    )
    known = serializers.BooleanField(
        read_only=True, help_text="False when only its name is recorded, not its document."
    )
    document = PolicyDocumentField(allow_null=True, read_only=True)
    created_by: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        read_only=True, allow_null=True, slug_field="username"
    )

    class Meta:
        model = GatewayPolicy
        fields = [
            "service",
            "version",
            "label",
            "known",
            "sha256",
            "document",
            "note",
            "created_by",
            "created_at",
        ]
        read_only_fields = fields


class GatewayPolicyCreateSerializer(serializers.Serializer):
    document = PolicyDocumentField(
        help_text="The whole policy; a change is a new version (copy the one in force and edit)."
    )
    note = serializers.CharField(
        required=False, allow_blank=True, max_length=2000, help_text="What changed and why."
    )


class GatewayPolicyInForceSerializer(serializers.Serializer):
    version = serializers.CharField(help_text="The label of the version in force: v2.")
    revision = serializers.CharField(help_text="The live revision that runs with it: r3.")
    known = serializers.BooleanField()
    sha256 = serializers.CharField()
    document = PolicyDocumentField(allow_null=True)
