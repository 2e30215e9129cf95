"""Shapes of the REST API. Serializers validate and shape; writes go through `ledger.services`.

Related objects are named by their natural keys (team slug, service slug,
SPDX id, runtime name); people only by username.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from django.contrib.auth import get_user_model
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from ledger import queries, services
from ledger.models import (
    Capability,
    License,
    ModelAsset,
    Revision,
    Runtime,
    Service,
    Team,
)
from ledger.queries import license_findings
from ledger.roles import roles_of
from ledger.serializers.choices import NamedChoicesMixin
from ledger.serializers.licenses import LicenseAcceptanceSerializer, LicenseReviewRecordSerializer
from ledger.validators import EXAMPLE_DIGEST, validate_name_token

if TYPE_CHECKING:
    from django.contrib.auth.models import User


class WhoAmISerializer(serializers.ModelSerializer):
    roles = serializers.SerializerMethodField()

    class Meta:
        model = get_user_model()
        fields = ["id", "username", "first_name", "last_name", "email", "roles"]

    def get_roles(self, user) -> list[str]:
        return [role.value for role in roles_of(user)]


def _lock_reasons(obj) -> list[str]:
    # Computed once per object per response: `locked` and `lock_reasons` share it.
    if not hasattr(obj, "_api_lock_reasons"):
        obj._api_lock_reasons = obj.lock_reasons()
    return obj._api_lock_reasons


class LockSerializerMixin(serializers.Serializer):
    locked = serializers.SerializerMethodField(
        help_text="True when it may no longer change; make a new revision instead."
    )
    lock_reasons = serializers.SerializerMethodField()

    def get_locked(self, obj) -> bool:
        return bool(_lock_reasons(obj))

    def get_lock_reasons(self, obj) -> list[str]:
        return _lock_reasons(obj)


# ---------------------------------------------------------------- teams and licenses


class TeamSerializer(serializers.ModelSerializer):
    # many=True makes a ManyRelatedField of these, which the stubs cannot say.
    members: serializers.SlugRelatedField[User] = serializers.SlugRelatedField(
        many=True, read_only=True, slug_field="username"
    )

    class Meta:
        model = Team
        fields = ["slug", "name", "members"]


class LicenseSerializer(serializers.ModelSerializer):
    class Meta:
        model = License
        fields = ["spdx_id", "name", "kind", "gated", "terms_url"]
        extra_kwargs = {
            "kind": {
                "required": False,
                "help_text": "Optional for well-known ids (Apache-2.0, MIT, CC-BY-NC-4.0, …).",
            }
        }


# ---------------------------------------------------------------- services


class TaskTypeSlugsField(serializers.ListField):
    """Task types by slug; an unknown slug is a new task type (as in the domain)."""

    child = serializers.SlugField(max_length=40)

    def to_representation(self, data) -> list[str]:
        return [task_type.slug for task_type in data.all()]


class RevisionSummarySerializer(serializers.ModelSerializer):
    # A field named `label` shadows Field.label in the stubs; at run time the metaclass
    # takes declared fields off the class, so nothing is shadowed (the same below).
    label = serializers.CharField(read_only=True)  # type: ignore[assignment]
    model_asset: serializers.StringRelatedField[ModelAsset] = serializers.StringRelatedField(
        help_text="name@revision"
    )
    runtime: serializers.SlugRelatedField[Runtime] = serializers.SlugRelatedField(
        read_only=True, slug_field="name"
    )
    engine = serializers.CharField(source="runtime.engine", read_only=True)
    gateway_policy_version = serializers.CharField(
        read_only=True, help_text="The gateway policy version it runs with: v2, or gw-2026.03."
    )

    class Meta:
        model = Revision
        fields = [
            "id",
            "label",
            "fingerprint",
            "model_asset",
            "runtime",
            "engine",
            "context_limit",
            "gateway_policy_version",
            "served_at",
        ]
        read_only_fields = fields


class FindingSerializer(serializers.Serializer):
    severity = serializers.ChoiceField(choices=["breach", "warning"])
    code = serializers.CharField()
    message = serializers.CharField()


class ServiceSerializer(NamedChoicesMixin, serializers.ModelSerializer):
    team = serializers.SlugRelatedField(slug_field="slug", queryset=Team.objects.all())
    task_types = TaskTypeSlugsField(required=False, help_text='Slugs, e.g. ["chat", "rag"].')
    tenants = serializers.ListField(
        child=serializers.CharField(max_length=80), required=False, help_text="Tenants served."
    )
    live_revision = RevisionSummarySerializer(read_only=True, allow_null=True)

    class Meta:
        model = Service
        fields = [
            *Service.STATED_FIELDS,
            "live_revision",
            "created_at",
            "updated_at",
        ]


class ServiceDetailSerializer(ServiceSerializer):
    license_findings = serializers.SerializerMethodField(
        help_text="License and lifecycle problems of serving the live revision on this service."
    )

    class Meta(ServiceSerializer.Meta):
        fields = [*ServiceSerializer.Meta.fields, "license_findings"]

    @extend_schema_field(FindingSerializer(many=True))
    def get_license_findings(self, service: Service) -> list[dict[str, str]]:
        if service.live_revision is None:
            return []
        return [
            {"severity": f.severity, "code": f.code, "message": f.message}
            for f in license_findings(service, service.live_revision)
        ]


# ---------------------------------------------------------------- model assets


class ModelAssetSerializer(NamedChoicesMixin, serializers.ModelSerializer):
    team = serializers.SlugRelatedField(slug_field="slug", queryset=Team.objects.all())
    license = serializers.SlugRelatedField(slug_field="spdx_id", queryset=License.objects.all())

    class Meta:
        model = ModelAsset
        fields = [
            "id",
            "name",
            "revision",
            "team",
            "family",
            "source_repository",
            "weights_digest",
            "license",
            "license_approval",
            "quantization",
            "derived_from",
            "derivation",
            "tokenizer_id",
            "tokenizer_digest",
            "chat_template_digest",
            "generation_config_digest",
            "config_digest",
            "model_card_url",
            "lifecycle",
            "deprecated_on",
            "retired_on",
            "created_at",
            "updated_at",
        ]
        # Governance state has its own verbs: license-review, deprecate, retire.
        read_only_fields = ["license_approval", "lifecycle", "deprecated_on", "retired_on"]
        extra_kwargs = {
            name: {"help_text": f"'sha256:' + 64 lowercase hex, e.g. {EXAMPLE_DIGEST}"}
            for name in (
                "weights_digest",
                "tokenizer_digest",
                "chat_template_digest",
                "generation_config_digest",
                "config_digest",
            )
        }


class AssetRefSerializer(serializers.ModelSerializer):
    license: serializers.SlugRelatedField[License] = serializers.SlugRelatedField(
        read_only=True, slug_field="spdx_id"
    )

    class Meta:
        model = ModelAsset
        fields = ["id", "name", "revision", "quantization", "derivation", "license"]
        read_only_fields = fields


class ModelAssetDetailSerializer(LockSerializerMixin, ModelAssetSerializer):
    lineage = serializers.SerializerMethodField(help_text="Ancestors, base first, then this asset.")
    license_review = serializers.SerializerMethodField(
        help_text="The last review of the license by security & compliance; null if none."
    )
    license_acceptances = LicenseAcceptanceSerializer(
        many=True,
        read_only=True,
        help_text="Recorded acceptances of gated license terms for this asset, newest first.",
    )

    class Meta(ModelAssetSerializer.Meta):
        fields = [
            *ModelAssetSerializer.Meta.fields,
            "locked",
            "lock_reasons",
            "lineage",
            "license_review",
            "license_acceptances",
        ]

    @extend_schema_field(LicenseReviewRecordSerializer(allow_null=True))
    def get_license_review(self, asset: ModelAsset) -> dict[str, Any] | None:
        review = queries.latest_license_review(asset)
        return None if review is None else LicenseReviewRecordSerializer(review).data

    @extend_schema_field(AssetRefSerializer(many=True))
    def get_lineage(self, asset: ModelAsset) -> list[dict[str, Any]]:
        # many=True makes a ListSerializer, whose data is a list; the stubs cannot say.
        return cast("list[dict[str, Any]]", AssetRefSerializer(asset.lineage(), many=True).data)


class LifecycleDateSerializer(serializers.Serializer):
    on = serializers.DateField(required=False, help_text="Defaults to today.")


# ---------------------------------------------------------------- runtimes


class RuntimeSerializer(NamedChoicesMixin, serializers.ModelSerializer):
    team = serializers.SlugRelatedField(slug_field="slug", queryset=Team.objects.all())
    launch_parameters = serializers.DictField(
        required=False,
        help_text='Engine flags as a JSON object, e.g. {"max_model_len": 32768}.',
        error_messages={
            "not_a_dict": 'Expected a JSON object of engine flags such as {{"max_model_len": '
            "32768}}; got {input_type}."
        },
    )
    image_digest = serializers.CharField(read_only=True, allow_null=True)
    warnings = serializers.SerializerMethodField(
        help_text="Accepted, but worth knowing (unknown flags, an image not pinned by digest)."
    )

    class Meta:
        model = Runtime
        fields = [
            *Runtime.STATED_FIELDS,
            "image_digest",
            "warnings",
            "created_at",
            "updated_at",
        ]

    def get_warnings(self, runtime: Runtime) -> list[str]:
        return services.runtime_warnings(runtime)


class RuntimeDetailSerializer(LockSerializerMixin, RuntimeSerializer):
    class Meta(RuntimeSerializer.Meta):
        fields = [*RuntimeSerializer.Meta.fields, "locked", "lock_reasons"]


# ---------------------------------------------------------------- capabilities


class CapabilitySerializer(NamedChoicesMixin, serializers.ModelSerializer):
    service: serializers.SlugRelatedField[Service] = serializers.SlugRelatedField(
        source="revision.service", read_only=True, slug_field="slug"
    )
    revision_label = serializers.CharField(source="revision.label", read_only=True)
    current = serializers.SerializerMethodField(
        help_text="Verified against the revision's present fingerprint."
    )

    class Meta:
        model = Capability
        fields = [
            "id",
            "revision",
            "service",
            "revision_label",
            "kind",
            "value",
            "status",
            "verified_fingerprint",
            "verified_at",
            "evidence",
            "current",
        ]
        read_only_fields = ["status", "verified_fingerprint", "verified_at", "evidence"]
        # Declaring an existing kind again re-declares it (the domain's upsert).
        validators: list[Any] = []

    def get_current(self, capability: Capability) -> bool:
        return (
            capability.status == Capability.Status.VERIFIED
            and capability.verified_fingerprint == capability.revision.fingerprint
        )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if self.instance is not None:
            for name in ("revision", "kind"):
                if name in attrs and attrs[name] != getattr(self.instance, name):
                    raise serializers.ValidationError(
                        {name: "Fixed once declared; declare a new capability instead."}
                    )
        return attrs


# ---------------------------------------------------------------- revisions


class RevisionSerializer(LockSerializerMixin, serializers.ModelSerializer):
    service = serializers.SlugRelatedField(slug_field="slug", queryset=Service.objects.all())
    label = serializers.CharField(read_only=True)  # type: ignore[assignment]
    model_asset_label: serializers.StringRelatedField[ModelAsset] = serializers.StringRelatedField(
        source="model_asset"
    )
    runtime = serializers.SlugRelatedField(slug_field="name", queryset=Runtime.objects.all())
    engine = serializers.CharField(source="runtime.engine", read_only=True)
    gateway_policy_version = serializers.CharField(
        max_length=40,
        validators=[validate_name_token],
        help_text=(
            "The version of the service's gateway policy it runs with (v2). Any other name "
            "records a policy known by name only, which production gates refuse."
        ),
    )
    created_by: serializers.SlugRelatedField[User] = serializers.SlugRelatedField(
        read_only=True,
        allow_null=True,
        slug_field="username",
        help_text="Username of who made it; null when the system did, or the account is gone.",
    )

    class Meta:
        model = Revision
        fields = [
            "id",
            "service",
            "number",
            "label",
            "model_asset",
            "model_asset_label",
            "runtime",
            "engine",
            "context_limit",
            "gateway_policy_version",
            "notes",
            "based_on",
            "fingerprint",
            "served_at",
            "created_by",
            "created_at",
            "locked",
            "lock_reasons",
        ]
        read_only_fields = ["number", "based_on", "fingerprint", "served_at", "created_at"]
        # The domain numbers revisions under a row lock; no serializer-level uniqueness check.
        validators: list[Any] = []


class SameFingerprintSerializer(serializers.ModelSerializer):
    service: serializers.SlugRelatedField[Service] = serializers.SlugRelatedField(
        read_only=True, slug_field="slug"
    )
    label = serializers.CharField(read_only=True)  # type: ignore[assignment]

    class Meta:
        model = Revision
        fields = ["id", "service", "label"]
        read_only_fields = fields


class RevisionDetailSerializer(RevisionSerializer):
    same_fingerprint = serializers.SerializerMethodField(
        help_text="Other revisions with this fingerprint: by inference config, the same thing."
    )
    capabilities = CapabilitySerializer(many=True, read_only=True)

    class Meta(RevisionSerializer.Meta):
        fields = [*RevisionSerializer.Meta.fields, "same_fingerprint", "capabilities"]

    @extend_schema_field(SameFingerprintSerializer(many=True))
    def get_same_fingerprint(self, revision: Revision) -> list[dict[str, Any]]:
        same = SameFingerprintSerializer(queries.same_fingerprint(revision), many=True)
        return cast("list[dict[str, Any]]", same.data)  # a ListSerializer's list, as above


class NewRevisionSerializer(serializers.Serializer):
    """Overrides for 'new revision from this one'; anything left out is copied."""

    model_asset = serializers.PrimaryKeyRelatedField(
        queryset=ModelAsset.objects.all(), required=False
    )
    runtime = serializers.SlugRelatedField(
        slug_field="name", queryset=Runtime.objects.all(), required=False
    )
    context_limit = serializers.IntegerField(min_value=1, required=False)
    gateway_policy_version = serializers.CharField(
        max_length=40, required=False, validators=[validate_name_token]
    )
    notes = serializers.CharField(required=False, allow_blank=True)
