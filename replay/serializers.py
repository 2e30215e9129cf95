"""Shapes of the replay REST API. Serializers validate and shape; writes go through `replay.services`.

Related objects are named by their natural keys (backend name, sample set
`name@version`, service slug); people only by username. A backend's credential
is only ever the *name* of the environment variable that holds it.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from ledger.models import Revision
from replay.models import Backend, Probe, Result, Run, Sample, SampleSet

# ---------------------------------------------------------------- backends and probes


class ProbeSerializer(serializers.ModelSerializer):
    backend = serializers.SlugRelatedField(read_only=True, slug_field="name")

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
    service = serializers.SlugRelatedField(
        source="revision.service", slug_field="slug", read_only=True
    )
    revision_label = serializers.CharField(source="revision.label", read_only=True)
    credential_env = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=100,
        help_text="Name of the environment variable holding the API key on the workers, e.g. "
        "KB_ASSISTANT_API_KEY. The key itself is never stored, nor shown.",
    )

    class Meta:
        model = Backend
        fields = [
            "name",
            "revision",
            "revision_label",
            "service",
            "base_url",
            "model_name",
            "engine",
            "credential_env",
            "concurrency_limit",
            "connect_timeout_s",
            "first_token_timeout_s",
            "idle_timeout_s",
            "total_timeout_s",
            "enabled",
            "created_at",
            "updated_at",
        ]
        # The domain validates; the model's own validators would answer first and differently.
        extra_kwargs = {"name": {"validators": []}}


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


# ---------------------------------------------------------------- sample sets


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
            "sensitive",
            "repeat",
            "min_pass_rate",
        ]
        read_only_fields = fields


class SampleSetSerializer(serializers.ModelSerializer):
    ref = serializers.SerializerMethodField(help_text="name@version, how URLs address it.")
    created_by = serializers.SlugRelatedField(read_only=True, slug_field="username")
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


# ---------------------------------------------------------------- runs


class ResultSerializer(serializers.ModelSerializer):
    sample = serializers.SlugRelatedField(read_only=True, slug_field="key")
    category = serializers.CharField(source="sample.category", read_only=True)

    class Meta:
        model = Result
        fields = [
            "sample",
            "category",
            "attempt",
            "outcome",
            "error_code",
            "error_detail",
            "ttft_ms",
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
    backend = serializers.SlugRelatedField(read_only=True, slug_field="name")
    service = serializers.SlugRelatedField(
        source="revision.service", slug_field="slug", read_only=True
    )
    requested_by = serializers.SlugRelatedField(read_only=True, slug_field="username")

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
