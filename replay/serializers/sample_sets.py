"""Shapes of sample sets over REST."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rest_framework import serializers

from replay.models import Sample, SampleSet

if TYPE_CHECKING:
    from django.contrib.auth.models import User


class SampleSerializer(serializers.ModelSerializer):
    class Meta:
        model = Sample
        fields = [
            "key",
            "category",
            "messages",
            "params",
            "checks",
            "tags",
            "rerunnable",
            "tool_results",
            "sensitive",
            "repeat",
            "min_pass_rate",
        ]
        read_only_fields = fields


class SampleSetSerializer(serializers.ModelSerializer):
    ref = serializers.SerializerMethodField(help_text="name@version, how URLs address it.")
    created_by: serializers.SlugRelatedField[User] = serializers.SlugRelatedField(
        read_only=True,
        allow_null=True,
        slug_field="username",
        help_text="Username of who made it; null when the system did, or the account is gone.",
    )
    sample_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = SampleSet
        fields = [
            "id",
            "ref",
            "name",
            "version",
            "description",
            "sample_count",
            "created_by",
            "created_at",
        ]
        read_only_fields = fields

    def get_ref(self, sample_set: SampleSet) -> str:
        return f"{sample_set.name}@{sample_set.version}"


class SampleSetDetailSerializer(SampleSetSerializer):
    samples = SampleSerializer(many=True, read_only=True)

    class Meta(SampleSetSerializer.Meta):
        fields = [*SampleSetSerializer.Meta.fields, "samples"]
        read_only_fields = fields


class SampleSetImportSerializer(serializers.Serializer):
    name = serializers.SlugField(max_length=100, help_text="The set's name, e.g. kb-smoke.")
    description = serializers.CharField(required=False, allow_blank=True, default="")
    jsonl = serializers.CharField(
        trim_whitespace=False,
        help_text="The samples, one JSON object a line, as the export writes them.",
    )
