from releases.models.calendar import BlackoutWindow, StandardChangeTemplate
from releases.models.cost import CostShare
from releases.models.drill import Drill
from releases.models.exports import Export
from releases.models.gateway_checks import CheckReading, GatewayCheck, read_check
from releases.models.gateway_metrics import GatewayMetricsScrape
from releases.models.periodic_reviews import (
    Review,
    ReviewAction,
    ReviewChecklistItem,
    ReviewTrigger,
)
from releases.models.release import Release
from releases.models.rollback import ReadinessRecord, RollbackEvent, Runbook, UnauthorizedChange
from releases.models.rollout import Observation, Stage
from releases.models.signoffs import Comment, SignOff, Waiver
from releases.models.webhooks import Delivery, WebhookSubscription

__all__ = [
    "BlackoutWindow",
    "CheckReading",
    "Comment",
    "CostShare",
    "Delivery",
    "Drill",
    "Export",
    "GatewayCheck",
    "GatewayMetricsScrape",
    "Observation",
    "ReadinessRecord",
    "Release",
    "Review",
    "ReviewAction",
    "ReviewChecklistItem",
    "ReviewTrigger",
    "RollbackEvent",
    "Runbook",
    "SignOff",
    "Stage",
    "StandardChangeTemplate",
    "UnauthorizedChange",
    "Waiver",
    "WebhookSubscription",
    "read_check",
]
