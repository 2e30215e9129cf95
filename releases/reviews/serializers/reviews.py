"""Periodic reviews over REST: a review with its triggers and their numbers, its checklist
and actions; and the bodies a reviewer posts (answers, the conclusion)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from releases.models import Review, ReviewAction, ReviewChecklistItem, ReviewTrigger
from releases.reviews.services.periodic_reviews import NOTE_MAX_CHARS


def _slug(field: str, *, null: bool = False) -> serializers.SlugRelatedField:
    return serializers.SlugRelatedField(slug_field=field, read_only=True, allow_null=null)


class ReviewTriggerSerializer(serializers.ModelSerializer):
    numbers = serializers.JSONField(
        read_only=True, help_text="What was measured and compared, e.g. ttft_p95_7d_ms."
    )

    class Meta:
        model = ReviewTrigger
        fields = ["kind", "key", "summary", "numbers", "detected_at"]


class ChecklistItemSerializer(serializers.ModelSerializer):
    title = serializers.CharField(source="get_key_display", read_only=True)
    facts = serializers.JSONField(read_only=True, help_text='[{"label", "value", "url"}]')
    flags = serializers.ListField(child=serializers.CharField(), read_only=True)
    answered_by = _slug("username", null=True)

    class Meta:
        model = ReviewChecklistItem
        fields = [
            "key",
            "title",
            "position",
            "facts",
            "flags",
            "suggestion",
            "answer",
            "note",
            "answered_by",
            "answered_at",
        ]


class ReviewActionSerializer(serializers.ModelSerializer):
    service = _slug("slug")
    owner = _slug("username")
    done_by = _slug("username", null=True)

    class Meta:
        model = ReviewAction
        fields = [
            "id",
            "review",
            "service",
            "description",
            "owner",
            "due_on",
            "created_at",
            "done_at",
            "done_by",
            "done_note",
        ]


class ReviewSerializer(serializers.ModelSerializer):
    service = _slug("slug")
    tier = serializers.CharField(source="service.tier", read_only=True)
    assignee = _slug("username", null=True)
    concluded_by = _slug("username", null=True)
    triggers = ReviewTriggerSerializer(many=True, read_only=True)

    class Meta:
        model = Review
        fields = [
            "id",
            "service",
            "tier",
            "state",
            "raised_at",
            "due_on",
            "assignee",
            "started_at",
            "overdue_since",
            "concluded_at",
            "concluded_by",
            "outcome",
            "next_due_on",
            "triggers",
        ]


class ReviewDetailSerializer(ReviewSerializer):
    checklist = ChecklistItemSerializer(source="items", many=True, read_only=True)
    actions = ReviewActionSerializer(many=True, read_only=True)

    class Meta(ReviewSerializer.Meta):
        fields = [*ReviewSerializer.Meta.fields, "conclusion", "checklist", "actions"]


class AnswerSerializer(serializers.Serializer):
    key = serializers.ChoiceField(choices=ReviewChecklistItem.Key.choices)
    answer = serializers.ChoiceField(choices=ReviewChecklistItem.Answer.choices)
    note = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=NOTE_MAX_CHARS,
        help_text="Required unless the answer is ok.",
    )


class ChecklistAnswersRequestSerializer(serializers.Serializer):
    answers = AnswerSerializer(many=True, allow_empty=False)


class ActionRequestSerializer(serializers.Serializer):
    description = serializers.CharField(max_length=NOTE_MAX_CHARS)
    owner = serializers.CharField(max_length=150, help_text="The username of who does it.")
    due_on = serializers.DateField()


class ConclusionRequestSerializer(serializers.Serializer):
    outcome = serializers.ChoiceField(choices=Review.Outcome.choices)
    conclusion = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=NOTE_MAX_CHARS
    )
    next_due_on = serializers.DateField(
        required=False, allow_null=True, default=None, help_text="Default: the cadence from today."
    )
    actions = ActionRequestSerializer(many=True, required=False, default=list)

    def verb_arguments(self) -> dict[str, Any]:
        data = self.validated_data
        return {
            "outcome": data["outcome"],
            "conclusion": data["conclusion"],
            "next_due_on": data["next_due_on"],
            "actions": [dict(action) for action in data["actions"]],
        }
