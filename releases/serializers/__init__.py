"""Shapes of the releases API. Serializers validate and shape; writes go through
`releases.services`. Services are named by slug, revisions by id, people by username."""

from releases.serializers.exports import (
    DeliverySerializer,
    ExportSerializer,
    WebhookSubscriptionCreatedSerializer,
    WebhookSubscriptionSerializer,
)
from releases.serializers.releases import (
    CommentRequestSerializer,
    CommentSerializer,
    GateSerializer,
    GatesRefusalSerializer,
    ReleaseDetailSerializer,
    ReleaseSerializer,
    ReleaseWriteSerializer,
    SignOffRequestSerializer,
    SignOffSerializer,
    TransitionRefusalSerializer,
    WaiverRequestSerializer,
    WaiverSerializer,
    WithdrawRequestSerializer,
)
from releases.serializers.reviews import (
    ChecklistItemSerializer,
    ReviewActionSerializer,
    ReviewDetailSerializer,
    ReviewSerializer,
    ReviewTriggerSerializer,
)
from releases.serializers.rollout import (
    ObservationSerializer,
    RollbackEventSerializer,
    StageSerializer,
)

__all__ = [
    "ChecklistItemSerializer",
    "CommentRequestSerializer",
    "CommentSerializer",
    "DeliverySerializer",
    "ExportSerializer",
    "GateSerializer",
    "GatesRefusalSerializer",
    "ObservationSerializer",
    "ReleaseDetailSerializer",
    "ReleaseSerializer",
    "ReleaseWriteSerializer",
    "ReviewActionSerializer",
    "ReviewDetailSerializer",
    "ReviewSerializer",
    "ReviewTriggerSerializer",
    "RollbackEventSerializer",
    "SignOffRequestSerializer",
    "SignOffSerializer",
    "StageSerializer",
    "TransitionRefusalSerializer",
    "WaiverRequestSerializer",
    "WaiverSerializer",
    "WebhookSubscriptionCreatedSerializer",
    "WebhookSubscriptionSerializer",
    "WithdrawRequestSerializer",
]
