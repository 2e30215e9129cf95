"""Shapes of replay backends and probes over REST."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from ledger.models import Revision, Service
from replay.models import Backend, Probe


class ProbeSerializer(serializers.ModelSerializer):
    backend: serializers.SlugRelatedField[Backend] = serializers.SlugRelatedField(
        read_only=True, slug_field="name"
    )

    class Meta:
        model = Probe
        fields = [
            "id",
            "backend",
            "fingerprint",
            "started_at",
            "finished_at",
            "reachable",
            "served_models",
            "max_context",
            "engine_version",
            "drift",
            "capability_results",
            "error",
        ]
        read_only_fields = fields


class BackendSerializer(serializers.ModelSerializer):
    revision = serializers.PrimaryKeyRelatedField(
        queryset=Revision.objects.select_related("service__team"),
        help_text="Id of the registered revision this endpoint serves.",
    )
    service: serializers.SlugRelatedField[Service] = serializers.SlugRelatedField(
        source="revision.service", slug_field="slug", read_only=True
    )
    revision_label = serializers.CharField(source="revision.label", read_only=True)
    credential_env = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=100,
        help_text="Name of the environment variable holding the API key on the workers, e.g. "
        "LEDGER_BACKEND_KEY_KB_ASSISTANT. The key itself is never stored, nor shown.",
    )

    class Meta:
        model = Backend
        fields = [
            *Backend.STATED_FIELDS,
            "revision_label",
            "service",
            "created_at",
            "updated_at",
        ]
        # The domain validates; the model's own validators would answer first and differently.
        extra_kwargs: dict[str, dict[str, Any]] = {"name": {"validators": []}}


class BackendUpdateSerializer(BackendSerializer):
    """PATCH: the name is how everything addresses a backend, so it does not change."""

    class Meta(BackendSerializer.Meta):
        read_only_fields = ["name"]


class BackendDetailSerializer(BackendSerializer):
    latest_probe = serializers.SerializerMethodField()

    class Meta(BackendSerializer.Meta):
        fields = [*BackendSerializer.Meta.fields, "latest_probe"]

    @extend_schema_field(ProbeSerializer(allow_null=True))
    def get_latest_probe(self, backend: Backend) -> dict | None:
        probe = backend.probes.order_by("-started_at").first()
        return ProbeSerializer(probe).data if probe else None
