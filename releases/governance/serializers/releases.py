"""The release form over REST: the draft CI files, its gates, sign-offs and waivers."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from ledger.models import Revision, Service
from releases.governance.gates import Assessment, GateResult
from releases.governance.snapshot import FORM_FIELDS
from releases.models import Comment, Release, SignOff, StandardChangeTemplate, Waiver
from releases.policy import GATES, waiver_owner
from releases.schemas import EXAMPLES


def _username() -> serializers.SlugRelatedField:
    return serializers.SlugRelatedField(slug_field="username", read_only=True)


def _json(name: str, help_text: str) -> serializers.JSONField:
    return serializers.JSONField(required=False, help_text=f"{help_text} Example: {EXAMPLES[name]}")


class ReleaseWriteSerializer(serializers.ModelSerializer):
    """POST needs service, to_revision, change_kind and summary; the rest can come later
    (PATCH). The JSON parts are checked against their schemas by the verb, which names the
    field and the JSON path of a problem."""

    service = serializers.SlugRelatedField(slug_field="slug", queryset=Service.objects.all())
    to_revision = serializers.PrimaryKeyRelatedField(
        queryset=Revision.objects.select_related("service")
    )
    rollback_target = serializers.PrimaryKeyRelatedField(
        queryset=Revision.objects.select_related("service"), required=False, allow_null=True
    )
    standard_template = serializers.PrimaryKeyRelatedField(
        queryset=StandardChangeTemplate.objects.all(), required=False, allow_null=True
    )
    impact_tenants = _json("impact_tenants", "Tenant names.")
    impact_task_types = _json("impact_task_types", "Task type slugs.")
    impact_downstream = _json("impact_downstream", "Downstream systems touched.")
    impact_dismissed = _json(
        "impact_dismissed", "Systems the diff suggests that the change does not touch, with why."
    )
    required_sample_sets = _json("required_sample_sets", "Replay sample sets that must pass.")
    metrics_declared = _json("metrics_declared", "Metrics the revision exports.")
    failure_classifications = _json(
        "failure_classifications", "How each failed replay sample is handled."
    )
    gray_stages = _json("gray_stages", "The gray plan's stages, in order.")
    rollback_triggers = _json("rollback_triggers", "Conditions that trigger a rollback.")
    decommission_moves = _json("decommission_moves", "Where what a decommission ends goes.")
    logging_policy = _json("logging_policy", "Debug and audit logs, sensitive-content retention.")

    class Meta:
        model = Release
        # The release form, as the snapshot a signer approves and the events record it.
        fields = list(FORM_FIELDS)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if self.instance is not None and "service" in attrs:
            if attrs["service"].pk != self.instance.service_id:
                raise serializers.ValidationError(
                    {"service": ["A release stays with its service: file a new one instead."]}
                )
            attrs.pop("service")
        return attrs


class GateEvidenceSerializer(serializers.Serializer):
    kind = serializers.CharField(help_text="loadtest_report, replay_run, revision, …")
    id = serializers.JSONField(allow_null=True)
    # A field named like Field.label: DRF's metaclass takes it as a field, mypy cannot tell.
    label = serializers.CharField()  # type: ignore[assignment]
    url = serializers.CharField(allow_blank=True, help_text="The page of what was looked at.")


class GateWaiverSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    granted_by = serializers.CharField()
    reason = serializers.CharField()
    expires_at = serializers.DateTimeField()


class GateSerializer(serializers.Serializer):
    key = serializers.ChoiceField(choices=list(GATES))
    title = serializers.CharField()
    status = serializers.ChoiceField(choices=["pass", "fail", "waived", "pending", "advisory"])
    reason = serializers.CharField(help_text="Why, in plain words.")
    evidence = GateEvidenceSerializer(many=True)
    waiver = GateWaiverSerializer(allow_null=True)
    waivable_by = serializers.SerializerMethodField(
        help_text="The sign-off role whose holders may waive the gate; null when nobody may."
    )

    def get_waivable_by(self, gate: GateResult) -> str | None:
        return waiver_owner(gate["key"])


class SignOffSerializer(serializers.ModelSerializer):
    signer = _username()
    standing = serializers.SerializerMethodField(
        help_text="False when voided: the release changed after it was given."
    )
    void_reason = serializers.SerializerMethodField()

    class Meta:
        model = SignOff
        fields = [
            "id",
            "role",
            "signer",
            "decision",
            "comment",
            "snapshot_hash",
            "signed_at",
            "standing",
            "voided_at",
            "void_reason",
            "as_administrator",
        ]

    def _state(self, signoff: SignOff):
        assessment: Assessment | None = self.context.get("assessment")
        if assessment is None:
            return None
        return next((s for s in assessment.signoffs if s.signoff.pk == signoff.pk), None)

    def get_standing(self, signoff: SignOff) -> bool:
        state = self._state(signoff)
        return state.standing if state else signoff.voided_at is None

    def get_void_reason(self, signoff: SignOff) -> str:
        state = self._state(signoff)
        return state.void_reason if state and not state.standing else signoff.void_reason


class WaiverSerializer(serializers.ModelSerializer):
    granted_by = _username()

    class Meta:
        model = Waiver
        fields = ["id", "gate", "reason", "expires_at", "granted_by", "granted_at"]


class CommentSerializer(serializers.ModelSerializer):
    author = _username()

    class Meta:
        model = Comment
        fields = ["id", "author", "body", "created_at"]


class ReleaseSerializer(serializers.ModelSerializer):
    """A row of the list."""

    service: serializers.SlugRelatedField[Service] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )
    filed_by = _username()
    tier = serializers.CharField(source="service.tier", read_only=True)

    class Meta:
        model = Release
        fields = [
            "id",
            "service",
            "tier",
            "from_revision",
            "to_revision",
            "change_kind",
            "path",
            "risk",
            "summary",
            "state",
            "filed_by",
            "created_at",
            "submitted_at",
            "approved_at",
            "signoffs_due_at",
        ]


class ReleaseDetailSerializer(ReleaseWriteSerializer):
    """The whole form, its state, every gate, the snapshot hash, sign-offs and waivers."""

    id = serializers.IntegerField(read_only=True)
    service = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    to_revision = serializers.PrimaryKeyRelatedField(read_only=True)
    rollback_target = serializers.PrimaryKeyRelatedField(read_only=True, allow_null=True)
    standard_template = serializers.PrimaryKeyRelatedField(read_only=True, allow_null=True)
    filed_by = _username()
    # Empty until chosen: read-only fields lose the model's blank choice unless told.
    risk = serializers.ChoiceField(
        choices=Release.Risk.choices,
        allow_blank=True,
        read_only=True,
        help_text="Empty: the suggested risk applies.",
    )
    rollback_kind = serializers.ChoiceField(
        choices=Release.RollbackKind.choices, allow_blank=True, read_only=True
    )
    suggested_risk = serializers.SerializerMethodField()
    gates = serializers.SerializerMethodField()
    snapshot_hash = serializers.SerializerMethodField(
        help_text="SHA-256 of the canonical snapshot a sign-off now would be bound to."
    )
    signoffs = serializers.SerializerMethodField()
    required_signoffs = serializers.SerializerMethodField()
    waivers = serializers.SerializerMethodField(
        help_text="Gates set aside for this release (unrevoked), expired ones included."
    )
    signoffs_overdue = serializers.SerializerMethodField()

    class Meta(ReleaseWriteSerializer.Meta):
        fields = [
            "id",
            "state",
            *ReleaseWriteSerializer.Meta.fields,
            "suggested_risk",
            "from_revision",
            "filed_by",
            "reopened_from",
            "created_at",
            "updated_at",
            "submitted_at",
            "approved_at",
            "rollout_started_at",
            "closed_at",
            "signoffs_due_at",
            "signoffs_overdue",
            "gates",
            "snapshot_hash",
            "required_signoffs",
            "signoffs",
            "waivers",
        ]
        read_only_fields = fields

    def _assessment(self) -> Assessment:
        return self.context["assessment"]

    def get_suggested_risk(self, release: Release) -> str:
        from releases.governance.playbooks import never_degrading
        from releases.policy import suggested_risk

        strict = never_degrading(t for t in release.impact_task_types if isinstance(t, str))
        return suggested_risk(release.service.tier, release.change_kind, strict=bool(strict))

    def get_gates(self, release: Release) -> Any:
        return GateSerializer(self._assessment().gates, many=True).data

    def get_snapshot_hash(self, release: Release) -> str:
        return self._assessment().snapshot_hash

    def get_required_signoffs(self, release: Release) -> list[str]:
        return list(self._assessment().required_roles)

    def get_signoffs(self, release: Release) -> Any:
        signoffs = [s.signoff for s in self._assessment().signoffs]
        return SignOffSerializer(signoffs, many=True, context=self.context).data

    def get_waivers(self, release: Release) -> Any:
        return WaiverSerializer(self._assessment().waivers, many=True).data

    def get_signoffs_overdue(self, release: Release) -> bool:
        return self._assessment().overdue


class SignOffRequestSerializer(serializers.Serializer):
    role = serializers.ChoiceField(choices=SignOff.Role.choices)
    decision = serializers.ChoiceField(choices=SignOff.Decision.choices)
    comment = serializers.CharField(required=False, allow_blank=True, default="", max_length=10000)


class WaiverRequestSerializer(serializers.Serializer):
    gate = serializers.ChoiceField(choices=list(GATES))
    reason = serializers.CharField(max_length=5000)
    expires_at = serializers.DateTimeField(help_text="ISO 8601 with an offset.")


class WithdrawRequestSerializer(serializers.Serializer):
    reason = serializers.CharField(required=False, allow_blank=True, default="", max_length=5000)


class CommentRequestSerializer(serializers.Serializer):
    body = serializers.CharField(max_length=10000)


class TransitionRefusalSerializer(serializers.Serializer):
    detail = serializers.CharField(help_text="Why, naming the release's current state.")
    state = serializers.CharField(help_text="The release's current state.")


class GatesRefusalSerializer(serializers.Serializer):
    detail = serializers.CharField()
    gates = GateSerializer(many=True, help_text="The gates neither passed nor waived.")
