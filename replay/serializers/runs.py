"""Shapes of replay runs and results over REST."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rest_framework import serializers

from ledger.models import Service
from replay.models import Backend, Result, Run, Sample

if TYPE_CHECKING:
    from django.contrib.auth.models import User


class ResultSerializer(serializers.ModelSerializer):
    sample: serializers.SlugRelatedField[Sample] = serializers.SlugRelatedField(
        read_only=True, slug_field="key"
    )
    category = serializers.CharField(source="sample.category", read_only=True)

    class Meta:
        model = Result
        fields = [
            "sample",
            "category",
            "attempt",
            "outcome",
            "mode",
            "error_code",
            "error_detail",
            "ttft_ms",
            "server_ttft_ms",
            "tpot_ms",
            "e2e_ms",
            "prompt_tokens",
            "output_tokens",
            "finish_reason",
            "failed_checks",
            "output",
            "output_sha256",
            "output_length",
            "redacted",
        ]
        read_only_fields = fields


class RunSerializer(serializers.ModelSerializer):
    sample_set = serializers.SerializerMethodField(help_text="name@version the run used.")
    backend: serializers.SlugRelatedField[Backend] = serializers.SlugRelatedField(
        read_only=True, slug_field="name"
    )
    service: serializers.SlugRelatedField[Service] = serializers.SlugRelatedField(
        source="revision.service", slug_field="slug", read_only=True
    )
    requested_by: serializers.SlugRelatedField[User] = serializers.SlugRelatedField(
        read_only=True,
        allow_null=True,
        slug_field="username",
        help_text="Username of who started it; null for schedules and the system, or when the account is gone.",
    )

    class Meta:
        model = Run
        fields = [
            "id",
            "sample_set",
            "backend",
            "service",
            "revision",
            "fingerprint",
            "trigger",
            "state",
            "verdict",
            "concurrency",
            "requested_by",
            "created_at",
            "started_at",
            "finished_at",
            "summary",
            "baseline",
            "comparison",
        ]
        read_only_fields = fields

    def get_sample_set(self, run: Run) -> str:
        return f"{run.sample_set.name}@{run.sample_set.version}"


class RunDetailSerializer(RunSerializer):
    results = ResultSerializer(many=True, read_only=True)

    class Meta(RunSerializer.Meta):
        fields = [*RunSerializer.Meta.fields, "results"]
        read_only_fields = fields


class RunStartSerializer(serializers.Serializer):
    backend = serializers.SlugRelatedField(
        slug_field="name",
        queryset=Backend.objects.select_related("revision__service__team"),
        help_text="Name of the backend to replay against.",
    )
    sample_set = serializers.CharField(
        max_length=120,
        help_text="name (its latest version) or name@version, e.g. kb-smoke@3.",
    )
    concurrency = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=512,
        help_text="Requests in flight; the backend's limit when left out.",
    )
