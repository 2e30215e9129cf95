"""The license review and gated-license acceptances over REST: what a caller sends
(only the review's or the acceptance's own fields) and what comes back."""

from __future__ import annotations

from rest_framework import serializers

from ledger.models import LicenseAcceptance
from ledger.models.registry import ACCEPTED_BY_MAX_LENGTH, TERMS_VERSION_MAX_LENGTH
from ledger.services import COMMENT_MAX_LENGTH, REVIEW_DECISION_CHOICES


class LicenseReviewSerializer(serializers.Serializer):
    license_approval = serializers.ChoiceField(
        choices=REVIEW_DECISION_CHOICES,
        help_text="The decision: approved or rejected.",
        error_messages={
            "invalid_choice": '"{input}" is not a review decision: give approved or rejected.'
        },
    )
    comment = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=COMMENT_MAX_LENGTH,
        style={"base_template": "textarea.html"},
        help_text="Why; required to reject. Recorded in the event ledger with the decision.",
    )


class LicenseAcceptanceCreateSerializer(serializers.Serializer):
    terms_version = serializers.CharField(
        max_length=TERMS_VERSION_MAX_LENGTH,
        help_text="The version or date of the terms accepted, e.g. 3.1 or 2024-07-23.",
    )
    accepted_by = serializers.CharField(
        max_length=ACCEPTED_BY_MAX_LENGTH,
        help_text="Who accepted the terms on behalf of the company.",
    )
    accepted_at = serializers.DateTimeField(
        required=False, help_text="When, ISO 8601 with an offset; defaults to now."
    )
    note = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        style={"base_template": "textarea.html"},
        help_text="Where it was accepted and anything an auditor should know.",
    )


class LicenseAcceptanceSerializer(serializers.ModelSerializer):
    license: serializers.SlugRelatedField = serializers.SlugRelatedField(
        read_only=True, slug_field="spdx_id"
    )
    recorded_by: serializers.SlugRelatedField = serializers.SlugRelatedField(
        read_only=True,
        allow_null=True,
        slug_field="username",
        help_text="Who recorded it; null when the system did (manage.py apply).",
    )

    class Meta:
        model = LicenseAcceptance
        fields = [
            "id",
            "model_asset",
            "license",
            "terms_version",
            "accepted_by",
            "accepted_at",
            "recorded_by",
            "note",
        ]
        read_only_fields = fields


class LicenseReviewRecordSerializer(serializers.Serializer):
    """The last review of an asset's license, as the event ledger holds it."""

    decision = serializers.CharField(read_only=True)
    comment = serializers.CharField(read_only=True)
    reviewer = serializers.CharField(read_only=True, source="actor_label")
    at = serializers.DateTimeField(read_only=True)
    sequence = serializers.IntegerField(read_only=True, help_text="The review's event.")
